#!/bin/sh
# Install the Debian packages listed in third_party/packages.txt that are not yet installed.
# Idempotent and silent when everything is present.
set -eu

list="${1:-$(dirname "$0")/packages.txt}"
missing=""
for pkg in $(sed -e 's/#.*//' "$list"); do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    case "$status" in
    *"install ok installed"*) ;;
    *) missing="$missing $pkg" ;;
    esac
done

[ -z "$missing" ] && exit 0

echo "harvestd: installing missing Debian packages:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "harvestd: not root and no sudo; install these packages by hand:$missing" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# A fresh machine often has stale or empty package lists: refresh once if the first try fails.
if ! $SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null; then
    $SUDO apt-get update -q >/dev/null
    $SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null
fi

# The tests run promtool (Debian's prometheus package) and tinyproxy themselves; the packages'
# postinst scripts enable and start their servers where systemd runs. A server we just
# installed goes off again (one that was installed before is left as it was).
for service in prometheus tinyproxy; do
    case " $missing " in
    *" $service "*)
        if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
            $SUDO systemctl disable --now "$service.service" >/dev/null 2>&1 || true
            echo "harvestd: installed $service for the tests; its server is left disabled" >&2
        fi
        ;;
    esac
done
