#!/bin/sh
# replay.sh BIN CORPUS LOG [libFuzzer options...]: run every file of CORPUS once through the
# fuzz target BIN (h2o's 99fuzzer-*.t habit). libFuzzer stops at the first input that crashes;
# the replay then goes on with the files after it, so that every failing file is named.
# Exit status 1 if any input failed; the output of each failure is in LOG.
set -u
bin=$1 corpus=$2 log=$3
shift 3

list=$(mktemp)
trap 'rm -f "$list" "$list.rest"' EXIT
find "$corpus" -type f | LC_ALL=C sort >"$list"
: >"$log"
failed=0
while [ -s "$list" ]; do
    if tr '\n' '\0' <"$list" | xargs -0 "$bin" -runs=1 "$@" >"$log.run" 2>&1; then
        cat "$log.run" >>"$log"
        break
    fi
    cat "$log.run" >>"$log"
    bad=$(grep -a '^Running: ' "$log.run" | tail -n 1 | cut -c10-)
    failed=1
    if [ -z "$bad" ]; then
        echo "replay: $bin failed before running an input" >&2
        break
    fi
    echo "replay: $bad: $(grep -a -m1 -E 'check failed|ERROR: [A-Za-z]+Sanitizer|runtime error|ERROR: libFuzzer' "$log.run")" >&2
    # The files after the one that failed.
    awk -v bad="$bad" 'found { print } $0 == bad { found = 1 }' "$list" >"$list.rest"
    mv "$list.rest" "$list"
done
rm -f "$log.run"
exit $failed
