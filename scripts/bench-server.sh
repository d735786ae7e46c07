#!/usr/bin/env bash
# Compares flexdb-server with redis-server using redis-benchmark, same
# machine, loopback, one after the other (issue 39's benchmark).
#
#   scripts/bench-server.sh            # the issue's full run (long)
#   N=100000 scripts/bench-server.sh   # a quick look
#   LOAD=10000000 scripts/bench-server.sh  # first load 10 M keys (100-byte
#                                          # values) into both, report memory
#
# Installs redis-tools and redis-server from Debian when missing. Prints
# one table row per server, command and pipelining depth: requests/s,
# p50 and p99 latency (ms), and each server's resident memory after the
# run. Stores live in a temporary directory, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-2000000}          # requests per command
R=${R:-10000000}         # key space (-r)
C=${C:-50}               # clients
D=${D:-100}              # value size
TESTS=${TESTS:-set,get,incr,mset}
LOAD=${LOAD:-0}          # keys loaded into both servers before the run
PORT_FLEX=${PORT_FLEX:-7379}
PORT_REDIS=${PORT_REDIS:-7380}

need() {
    command -v "$1" >/dev/null 2>&1 && return
    echo "installing $2" >&2
    apt-get update -qq && apt-get install -y -qq "$2" >/dev/null
}
need redis-benchmark redis-tools
need redis-server redis-server

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build --release -p flexdb-server >&2
BIN="$CARGO_TARGET_DIR/release/flexdb-server"

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

"$BIN" --dir "$WORK/flex" --port "$PORT_FLEX" --appendfsync everysec >"$WORK/flex.log" 2>&1 &
PIDS+=($!)
FLEX_PID=$!
redis-server --port "$PORT_REDIS" --dir "$WORK" --appendonly yes --appendfsync everysec \
    --save '' --daemonize no >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
REDIS_PID=$!
for port in "$PORT_FLEX" "$PORT_REDIS"; do
    for _ in $(seq 100); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
done

rss_mb() { awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status"; }

if [ "$LOAD" -gt 0 ]; then
    # SET key:N <100 bytes> for N in 1..LOAD, as RESP, through redis-cli --pipe.
    for port in "$PORT_FLEX" "$PORT_REDIS"; do
        start=$(date +%s.%N)
        seq 1 "$LOAD" | awk -v v="$(head -c "$D" /dev/zero | tr '\0' x)" \
            '{k="key:" $1; printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, length(v), v}' |
            redis-cli -p "$port" --pipe >/dev/null
        end=$(date +%s.%N)
        echo "loaded $LOAD keys into port $port in $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}') s" >&2
    done
    echo "resident memory after loading $LOAD keys: flexdb-server $(rss_mb "$FLEX_PID") MB, redis-server $(rss_mb "$REDIS_PID") MB"
    echo
fi

printf '| server | command | -P | requests/s | p50 ms | p99 ms |\n|---|---|---|---|---|---|\n'
for P in 16 1; do
    for name in flexdb-server redis-server; do
        port=$PORT_FLEX
        [ "$name" = redis-server ] && port=$PORT_REDIS
        # --csv: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
        redis-benchmark -p "$port" -t "$TESTS" -n "$N" -r "$R" -c "$C" -P "$P" -d "$D" --csv -q 2>/dev/null |
            tail -n +2 | tr -d '"' |
            awk -F, -v s="$name" -v p="$P" '{printf "| %s | %s | %s | %.0f | %s | %s |\n", s, $1, p, $2, $5, $7}'
    done
done
echo
echo "resident memory after the run: flexdb-server $(rss_mb "$FLEX_PID") MB, redis-server $(rss_mb "$REDIS_PID") MB"
