"""Name lookups for tests, without a packet leaving the machine.

glibc sends a query to the configured nameserver even for names that cannot exist
(`.invalid`), so a test that makes harvestd look a name up runs it in a network and mount
namespace of its own: loopback up, /etc/resolv.conf bind-mounted to a file that names
127.0.0.1, and resolver.py answering there with the addresses the test gives (NXDOMAIN for
any other name). Nothing else is reachable from inside: servers the test needs must listen
inside too. Where the namespace cannot be made (not root, no unshare or ip), the test skips.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

from harness import LOOPBACK_RANGES

HERE = os.path.dirname(os.path.abspath(__file__))

# Mount and network namespaces, and a PID namespace whose first process is the script: when
# it ends, the kernel stops every process still in it (a server `setup` left running too).
# Its own /proc, so that a process there sees itself (LeakSanitizer reads /proc/PID/task).
UNSHARE = ["unshare", "-m", "-n", "-p", "--fork", "--mount-proc"]

# Runs inside the namespace: $1 resolv.conf, $2 ready file, then the resolver's names up to
# "--", then the command.
SCRIPT = r"""
set -e
ip link set lo up
[ -z "$NETNS_SETUP" ] || sh -c "$NETNS_SETUP"
mount --bind "$1" /etc/resolv.conf
ready=$2
shift 2
names=""
while [ "$1" != "--" ]; do names="$names $1"; shift; done
shift
python3 "$RESOLVER" 127.0.0.1 53 $names > "$ready" 2>&1 &
resolver=$!
i=0
until grep -q ready "$ready"; do
    i=$((i + 1))
    [ $i -lt 200 ] || { echo "resolver did not start" >&2; kill $resolver; exit 97; }
    sleep 0.05
done
set +e
"$@"
rc=$?
kill $resolver
wait $resolver 2>/dev/null
exit $rc
"""


def available():
    """'' when the namespace can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root for unshare -m -n"
    for tool in ("unshare", "ip", "mount"):
        if shutil.which(tool) is None:
            return "needs %s" % tool
    probe = subprocess.run(UNSHARE + ["sh", "-c", "ip link set lo up"],
                           capture_output=True, timeout=20)
    if probe.returncode != 0:
        return "unshare -m -n -p refused: %s" % probe.stderr.decode(errors="replace").strip()
    return ""


def run(argv, tmp_path, names=None, timeout=60, setup=""):
    """Run `argv` in its own network namespace where `names` ({name: [address...]}, A records
    for IPv4 addresses and AAAA for IPv6 ones) resolve and every other name is NXDOMAIN;
    `setup` is shell run first inside (after lo is up: e.g. a dummy interface). Returns the CompletedProcess (text stdout and stderr). A
    harvestd command line that says nothing about the address guard allows loopback, where
    the test's servers are (harness.LOOPBACK_RANGES)."""
    argv = list(argv)
    if (os.path.basename(argv[0]) == "harvestd" and "--allow-addresses" not in argv
            and "--allow-private-addresses" not in argv):
        argv += ["--allow-addresses", LOOPBACK_RANGES]
    why = available()
    if why:
        pytest.skip("name lookups run in a private network namespace, which " + why)
    # Files of this call only: a second call must not read the first resolver's "ready".
    own = pathlib.Path(tempfile.mkdtemp(prefix="netns-", dir=str(tmp_path)))
    resolv = own / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    ready = own / "resolver.out"
    specs = ["%s=%s" % (n, ",".join(a)) for n, a in (names or {}).items()]
    env = dict(os.environ, RESOLVER=os.path.join(HERE, "resolver.py"), NETNS_SETUP=setup)
    cmd = (UNSHARE + ["sh", "-c", SCRIPT, "sh", str(resolv), str(ready)] + specs
           + ["--"] + list(argv))
    done = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env, text=True)
    if done.returncode == 97:
        pytest.fail("the test resolver did not start: %s" % ready.read_text())
    sys.stderr.write(done.stderr)
    return done
