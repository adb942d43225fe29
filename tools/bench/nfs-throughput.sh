#!/usr/bin/env bash
# NFSv3 throughput and small-file rates: Cairn (cairnd, lz4, checksums on, a
# file-backed pool) side by side with nfs-ganesha serving a plain directory on
# the same disk (../shared/peers/peer-ganesha.sh). Never pass/fail.
#
#   tools/bench/nfs-throughput.sh [BUILD_DIR]       (default: build)
#
# Environment: BENCH_DIR (default /var/tmp/cairn-nfs-bench; pool file and the
# ganesha export live there, so both servers use the same disk), BENCH_GIB (2),
# BENCH_RUNS (3), BENCH_FILES (2000: small files for nfs-meta-bench).
#
# For each server: RUNS x (write BENCH_GIB with nfs-cp, drop the page cache,
# read it back with nfs-cp to /dev/null); prints medians in MiB/s and the
# server's CPU-seconds per GiB (utime+stime of the server process from
# /proc), then nfs-meta-bench create/stat/readdir/unlink rates with 0-byte
# and 4 KiB files. Needs root, libnfs-utils, nfs-ganesha, nfs-ganesha-vfs and
# rpcbind (the ganesha side is skipped when they are missing).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" != --ganesha-inner ]; then
    BUILD=${1:-$SRC/build}
    BUILD=$(cd "$BUILD" && pwd)
fi
BENCH_DIR=${BENCH_DIR:-/var/tmp/cairn-nfs-bench}
GIB=${BENCH_GIB:-2}
RUNS=${BENCH_RUNS:-3}
FILES=${BENCH_FILES:-2000}
PEERS=$SRC/../shared/peers
[ -d "$PEERS" ] || PEERS=/work/shared/peers

mkdir -p "$BENCH_DIR"
META=$BENCH_DIR/nfs-meta-bench
gcc -O2 -Wall -o "$META" "$PEERS/nfs-meta-bench.c" -lnfs

DATA=$BENCH_DIR/data.bin
if [ ! -f "$DATA" ] || [ "$(stat -c %s "$DATA")" -ne $((GIB << 30)) ]; then
    # Half random, half repeated text: lz4 has something to do, but not everything.
    python3 - "$DATA" "$GIB" <<'EOF'
import os, sys
path, gib = sys.argv[1], int(sys.argv[2])
chunk = os.urandom(1 << 19) + (b"cairn benchmark text line 0123456789\n" * 14170)[: 1 << 19]
with open(path, "wb") as f:
    for _ in range(gib << 10):
        f.write(chunk)
EOF
fi

# Reads land in memory (nfs-cp cannot write to /dev/null).
READBACK=${BENCH_READBACK:-/dev/shm/cairn-nfs-bench.read}

cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ticks=$(getconf CLK_TCK)
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# run_io NAME PID BASEURL ARGS: medians of write/read MiB/s and server CPU-s per GiB.
run_io() {
    local name=$1 pid=$2 url=$3 args=$4 i w r cw cr
    local ws=() rs=() cws=() crs=()
    for i in $(seq 1 "$RUNS"); do
        local c0 t0 t1 c1
        c0=$(cpu_of "$pid"); t0=$(date +%s.%N)
        nfs-cp "$DATA" "$url/bench.$i?$args" >/dev/null
        t1=$(date +%s.%N); c1=$(cpu_of "$pid")
        ws+=("$(echo "($GIB * 1024) / ($t1 - $t0)" | bc -l)")
        cws+=("$(echo "($c1 - $c0) / $ticks / $GIB" | bc -l)")
        sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
        c0=$(cpu_of "$pid"); t0=$(date +%s.%N)
        nfs-cp "$url/bench.$i?$args" "$READBACK" >/dev/null
        rm -f "$READBACK"
        t1=$(date +%s.%N); c1=$(cpu_of "$pid")
        rs+=("$(echo "($GIB * 1024) / ($t1 - $t0)" | bc -l)")
        crs+=("$(echo "($c1 - $c0) / $ticks / $GIB" | bc -l)")
    done
    w=$(printf '%s\n' "${ws[@]}" | median); r=$(printf '%s\n' "${rs[@]}" | median)
    cw=$(printf '%s\n' "${cws[@]}" | median); cr=$(printf '%s\n' "${crs[@]}" | median)
    printf '| %-7s | v3 seq write | %7.1f MiB/s | %5.2f CPU-s/GiB |\n' "$name" "$w" "$cw"
    printf '| %-7s | v3 seq read  | %7.1f MiB/s | %5.2f CPU-s/GiB |\n' "$name" "$r" "$cr"
}

# run_meta NAME BASEURL ARGS
run_meta() {
    local name=$1 url=$2 args=$3 size
    for size in 0 4096; do
        local out
        out=$("$META" "$url?$args" "$FILES" "$size" | tr '\n' ' ')
        printf '| %-7s | v3 meta %5s B | %s |\n' "$name" "$size" "$out"
    done
}

if [ "${1:-}" = --ganesha-inner ]; then
    run_io ganesha "$PEER_GANESHA_PID" "$PEER_NFS3_URL" "$PEER_NFS3_ARGS"
    run_meta ganesha "$PEER_NFS3_URL" "$PEER_NFS3_ARGS"
    exit 0
fi

echo "# $GIB GiB sequential over NFSv3 (libnfs nfs-cp), medians of $RUNS runs; $FILES small files; $(nproc) cores"
# ---- Cairn ----
CAIRN_STATE=$BENCH_DIR/cairn
rm -rf "$CAIRN_STATE"
mkdir -p "$CAIRN_STATE"
truncate -s 16G "$CAIRN_STATE/pool.img"
export CAIRN_SOCKET=$CAIRN_STATE/cairnd.sock
P=$((30000 + RANDOM % 20000))
"$BUILD/cairnd" --foreground --state-dir "$CAIRN_STATE" --socket "$CAIRN_SOCKET" \
    --nfs-listen "127.0.0.1:$P" --mount-listen "127.0.0.1:$((P + 1))" \
    --portmap-listen "127.0.0.1:$((P + 2))" --iscsi-listen "127.0.0.1:$((P + 3))" \
    2>"$CAIRN_STATE/cairnd.log" &
CPID=$!
trap 'kill $CPID 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do "$BUILD/cairn" pool list >/dev/null 2>&1 && break; sleep 0.1; done
"$BUILD/cairn" pool create tank "$CAIRN_STATE/pool.img"
"$BUILD/cairn" create -o sharenfs=no_root_squash -o compression=lz4 -o checksum=fletcher4 tank/bench
CARGS="nfsport=$P&mountport=$((P + 1))&version=3"
echo "| server  | test | rate | server CPU |"
echo "|---|---|---|---|"
run_io cairn "$CPID" "nfs://127.0.0.1/tank/bench" "$CARGS"
run_meta cairn "nfs://127.0.0.1/tank/bench" "$CARGS"
kill "$CPID"; wait "$CPID" 2>/dev/null || true
trap - EXIT
rm -rf "$CAIRN_STATE"

# ---- nfs-ganesha on the same disk ----
if command -v ganesha.nfsd >/dev/null && command -v rpcbind >/dev/null; then
    PEER_DIR=$BENCH_DIR/ganesha PEER_REUSE_RPCBIND=1 bash "$PEERS/peer-ganesha.sh" -- \
        env BENCH_DIR="$BENCH_DIR" BENCH_GIB="$GIB" BENCH_RUNS="$RUNS" BENCH_FILES="$FILES" \
        bash "$0" --ganesha-inner
    rm -rf "$BENCH_DIR/ganesha"
else
    echo "# nfs-ganesha or rpcbind missing: apt-get install -y nfs-ganesha nfs-ganesha-vfs rpcbind"
fi
