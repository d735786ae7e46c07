#!/usr/bin/env bash
# Times `flexdb backup` (physical, the default, and --logical) of a store
# of N pairs (default 2,000,000 of 16-byte keys and 100-byte values),
# in a directory on ext4 (or wherever BENCH_DIR is) and, when
# FLEXDB_REFLINK_DIR names a mount that shares blocks (XFS), there too.
# Prints one markdown row per (file system, method): seconds, the
# report's bytes / shared_bytes / disk_bytes, and how much free space
# the file system lost (df), which is what a reflink saves.
#
#   scripts/bench-backup.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2000000}
cargo build --release -q -p flexdb-cli
bin=target/release/flexdb

free_kb() { df -k --output=avail "$1" | tail -1 | tr -d ' '; }

run_on() {
    local fs=$1 root=$2
    local work
    work=$(mktemp -d "$root/flexdb-bench-backup.XXXXXX")
    python3 - "$n" > "$work/in.jsonl" <<'PY'
import sys, random
n = int(sys.argv[1])
rnd = random.Random(1)
keys = list(range(n))
rnd.shuffle(keys)
for k in keys:
    v = "%0100d" % rnd.getrandbits(300)
    print('{"key":"key%012d","value":"%s"}' % (k, v[:100]))
PY
    "$bin" load "$work/db" "$work/in.jsonl" --format jsonl -q >/dev/null
    rm "$work/in.jsonl"
    sync
    for method in physical logical; do
        local flag=""
        [ "$method" = logical ] && flag="--logical"
        sync
        local before after start end
        before=$(free_kb "$work")
        start=$(date +%s.%N)
        local out
        out=$("$bin" backup "$work/db" "$work/b-$method" $flag --json -q)
        sync
        end=$(date +%s.%N)
        after=$(free_kb "$work")
        python3 - "$fs" "$method" "$start" "$end" "$before" "$after" "$out" <<'PY'
import json, sys
fs, method, start, end, before, after, out = sys.argv[1:]
r = json.loads(out)
mb = lambda b: "%.0f MB" % (b / 1e6)
print("| %s | %s | %d | %.2f | %s | %s | %s | %s |" % (
    fs, method, r["pairs"], float(end) - float(start), mb(r["bytes"]),
    mb(r["shared_bytes"]), mb(r["disk_bytes"]), mb((int(before) - int(after)) * 1024)))
PY
    done
    rm -rf "$work"
}

echo "| file system | method | pairs | seconds | bytes copied | bytes shared | disk_bytes | free space used |"
echo "|---|---|---|---|---|---|---|---|"
run_on "${BENCH_FS:-ext4}" "${BENCH_DIR:-/tmp}"
if [ -n "${FLEXDB_REFLINK_DIR:-}" ]; then
    run_on xfs "$FLEXDB_REFLINK_DIR"
fi
