#!/usr/bin/env bash
# NFSv3 and NFSv4 throughput and small-file rates: Cairn (cairnd, lz4 and
# fletcher4, a file-backed pool) side by side with nfs-ganesha (VFS FSAL)
# serving a plain directory on the same disk (../shared/peers/peer-ganesha.sh),
# both servers up for the whole run, repetitions outermost and the two servers
# alternating inside each. Never pass/fail.
#
#   tools/bench/nfs-throughput.sh [BUILD_DIR]       (default: build)
#
# Environment: BENCH_DIR (default /var/tmp/cairn-nfs-bench; the pool file and
# the ganesha export live there, so both servers use the same disk), BENCH_GIB
# (2), BENCH_RUNS (3), BENCH_FILES (2000 small files per metadata phase),
# BENCH_ARC (8G: Cairn's arc_max, so a file just written or read fits in its
# cache as it fits in the page cache ganesha uses), BENCH_V4_CHUNK (3840) and
# BENCH_V4_DEPTH (32): NFSv4 writes go through bench_nfs_stream with WRITEs of
# that size in flight, because Debian's libnfs 4.0 cannot send an NFSv4 WRITE
# over ~3.9 KB (nfs-cp fails).
#
# One repetition, per server:
#   v3 write    nfs-cp of BENCH_GIB into a new file
#   v3 warm     nfs-cat of that file to /dev/null right away (nfs-cp into a
#               file costs the client 3x the CPU): each server serves what it
#               cached of the write (ganesha: the host page cache; Cairn: its ARC)
#   v3 cold     after emptying the caches: ganesha's with `sync; drop_caches`,
#               Cairn's by exporting and importing the pool (its leaves are
#               O_DIRECT, the page cache never holds them; drop_caches anyway)
#   v3 cold-4   emptied again, then read with 4 READs of 1 MiB in flight
#               (bench_nfs_stream -r), as a Linux client's read-ahead keeps
#               several going where nfs-cat keeps one
#   v4 write, v4 warm, v4 cold    the same over NFSv4.0 (libnfs version=4)
#   meta        nfs-meta-bench over v3 (0 B and 4 KiB files) and v4 (0 B)
# After both servers, each repetition measures the transport floor: what one
# client over loopback takes from a server that only sends 1 MiB replies from
# memory (bench_nfs_loopsend's write(2) mode), with one and with four asks in
# flight. No server reads faster than that here; report.md sets the reads next
# to it ("floor / ganesha": the best ratio any server could reach in this run).
# Rates are MiB/s of wall time around the client; CPU is the server process's
# utime+stime (/proc/PID/stat) over the phase, per GiB moved (ganesha's page
# cache writeback runs in kernel threads that this does not count). Writes of
# ganesha end when nfs-cp's COMMIT returns, i.e. on disk.
# Output: OUT/results.tsv (every phase), OUT/report.md (medians and ratios),
# OUT/conditions.txt (load average at start and end).
# Needs root, libnfs-utils, nfs-ganesha, nfs-ganesha-vfs and rpcbind (the
# ganesha side is skipped when they are missing).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BENCH_DIR=${BENCH_DIR:-/var/tmp/cairn-nfs-bench}
GIB=${BENCH_GIB:-2}
RUNS=${BENCH_RUNS:-3}
FILES=${BENCH_FILES:-2000}
ARC=${BENCH_ARC:-8G}
V4_CHUNK=${BENCH_V4_CHUNK:-3840}
V4_DEPTH=${BENCH_V4_DEPTH:-32}
PEERS=$SRC/../shared/peers
[ -d "$PEERS" ] || PEERS=/work/shared/peers
META=$BENCH_DIR/nfs-meta-bench
DATA=$BENCH_DIR/data.bin
ticks=$(getconf CLK_TCK)

cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
load1() { cut -d' ' -f1 /proc/loadavg; }

# phase SERVER PROTO PHASE REP PID COMMAND...: one timed client command, one TSV line
phase() {
    local server=$1 proto=$2 ph=$3 rep=$4 pid=$5 c0 t0 t1 c1
    shift 5
    c0=$(cpu_of "$pid"); t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N); c1=$(cpu_of "$pid")
    printf '%s\t%s\t%s\t%s\t%.1f\t%.3f\t%s\n' "$server" "$proto" "$ph" "$rep" \
        "$(echo "($GIB * 1024) / ($t1 - $t0)" | bc -l)" \
        "$(echo "($c1 - $c0) / $ticks / $GIB" | bc -l)" "$(load1)" >>"$OUT/results.tsv"
}

# meta SERVER PROTO SIZE REP PID URL: one nfs-meta-bench run, one TSV line per op
meta() {
    local server=$1 proto=$2 size=$3 rep=$4 pid=$5 url=$6 out op
    out=$("$META" "$url" "$FILES" "$size") || { echo "# meta $server $proto $size failed" >&2; return 0; }
    for op in create stat unlink; do
        printf '%s\t%s\tmeta-%s-%s\t%s\t%s\t\t%s\n' "$server" "$proto" "$op" "$size" "$rep" \
            "$(echo "$out" | sed -n "s/^${op}_ops_per_sec=//p")" "$(load1)" >>"$OUT/results.tsv"
    done
}

# floor REP DEPTH: the transport floor with DEPTH replies in flight, one TSV line
floor() {
    local out
    out=$("$BUILD/tools/bench/bench_nfs_loopsend" $((GIB * 1024)) 1 1024 "$2" copy) ||
        { echo "# floor $2 failed" >&2; return 0; }
    echo "$out" | awk -F'|' -v rep="$1" -v d="$2" -v ld="$(load1)" '$2 ~ /^ copy / {
        gsub(/ /, "", $3); gsub(/ /, "", $4)
        printf "floor\ttcp\tdepth-%s\t%s\t%s\t%s\t%s\n", d, rep, $3, $4, ld }' >>"$OUT/results.tsv"
}

drop_page_cache() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }

cairn_cold() {
    "$BUILD/cairn" pool export tank
    "$BUILD/cairn" pool import -d "$CAIRN_STATE" tank
    drop_page_cache
    # The import starts a grace period for the NFSv4 clients the pool recorded
    # (the earlier phases' clients), in which a new client's OPEN is refused
    # with NFS4ERR_GRACE; nfs_grace_time = 1 above keeps it short, wait it out.
    sleep 1.5
}

# one_server SERVER REP PID V3URL V3ARGS V4URL V4ARGS COLD_FUNCTION
one_server() {
    local s=$1 i=$2 pid=$3 u3=$4 a3=$5 u4=$6 a4=$7 cold=$8
    phase "$s" v3 write "$i" "$pid" nfs-cp "$DATA" "$u3/v3.$i?$a3"
    phase "$s" v3 read-warm "$i" "$pid" nfs-cat "$u3/v3.$i?$a3"
    $cold
    phase "$s" v3 read-cold "$i" "$pid" nfs-cat "$u3/v3.$i?$a3"
    $cold
    phase "$s" v3 read-cold-4 "$i" "$pid" "$BUILD/tools/bench/bench_nfs_stream" -r "$u3/v3.$i?$a3" \
        1048576 4
    phase "$s" v4 write "$i" "$pid" "$BUILD/tools/bench/bench_nfs_stream" "$DATA" "$u4/v4.$i?$a4" \
        "$V4_CHUNK" "$V4_DEPTH"
    phase "$s" v4 read-warm "$i" "$pid" nfs-cat "$u4/v4.$i?$a4"
    $cold
    phase "$s" v4 read-cold "$i" "$pid" nfs-cat "$u4/v4.$i?$a4"
    meta "$s" v3 0 "$i" "$pid" "$u3?$a3"
    meta "$s" v3 4096 "$i" "$pid" "$u3?$a3"
    meta "$s" v4 0 "$i" "$pid" "$u4?$a4" # libnfs 4.0: no v4 WRITE over ~3.9 KB, so no 4 KiB files
}

if [ "${1:-}" = --inner ]; then
    # Runs under peer-ganesha.sh (or alone when ganesha is missing).
    for i in $(seq 1 "$RUNS"); do
        one_server cairn "$i" "$CPID" "nfs://127.0.0.1/tank/bench" "$CARGS3" \
            "nfs://127.0.0.1/tank/bench" "$CARGS4" cairn_cold
        if [ -n "${PEER_GANESHA_PID:-}" ]; then
            one_server ganesha "$i" "$PEER_GANESHA_PID" "$PEER_NFS3_URL" "$PEER_NFS3_ARGS" \
                "$PEER_NFS4_URL" "$PEER_NFS4_ARGS" drop_page_cache
            rm -f "$PEER_EXPORT/v3.$i" "$PEER_EXPORT/v4.$i"
        fi
        floor "$i" 1
        floor "$i" 4
        echo "# repetition $i done, load $(load1)" >&2
    done
    exit 0
fi

BUILD=$(cd "${1:-$SRC/build}" && pwd)
[ -x "$BUILD/tools/bench/bench_nfs_stream" ] || make -C "$BUILD" bench_nfs_stream >/dev/null
[ -x "$BUILD/tools/bench/bench_nfs_loopsend" ] || make -C "$BUILD" bench_nfs_loopsend >/dev/null
mkdir -p "$BENCH_DIR"
OUT=${OUT:-$BENCH_DIR/results-$(date -u +%Y%m%dT%H%M%S)}
mkdir -p "$OUT"
gcc -O2 -Wall -o "$META" "$PEERS/nfs-meta-bench.c" -lnfs
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
{
    echo "start $(date -u +%FT%TZ) load $(cat /proc/loadavg)"
    echo "cores $(nproc), $(free -g | awk '/Mem:/ {print $2}') GiB RAM, kernel $(uname -r)"
    echo "GIB=$GIB RUNS=$RUNS FILES=$FILES ARC=$ARC V4_CHUNK=$V4_CHUNK V4_DEPTH=$V4_DEPTH"
} >"$OUT/conditions.txt"
printf 'server\tproto\tphase\trep\trate\tcpu_s_per_gib\tload1\n' >"$OUT/results.tsv"

# ---- Cairn, up for the whole run on its own ports ----
CAIRN_STATE=$BENCH_DIR/cairn
rm -rf "$CAIRN_STATE"
mkdir -p "$CAIRN_STATE"
truncate -s 32G "$CAIRN_STATE/pool.img"
P=$((30000 + RANDOM % 20000))
cat >"$CAIRN_STATE/cairnd.conf" <<EOF
state_dir = $CAIRN_STATE
socket = $CAIRN_STATE/cairnd.sock
nfs_listen = 127.0.0.1:$P
mount_listen = 127.0.0.1:$((P + 1))
portmap_listen = 127.0.0.1:$((P + 2))
iscsi_listen = 127.0.0.1:$((P + 3))
arc_max = $ARC
nfs_grace_time = 1
EOF
export CAIRN_SOCKET=$CAIRN_STATE/cairnd.sock
"$BUILD/cairnd" --config "$CAIRN_STATE/cairnd.conf" --foreground 2>"$CAIRN_STATE/cairnd.log" &
CPID=$!
trap 'kill $CPID 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do "$BUILD/cairn" pool list >/dev/null 2>&1 && break; sleep 0.1; done
"$BUILD/cairn" pool create tank "$CAIRN_STATE/pool.img"
"$BUILD/cairn" create -o sharenfs=no_root_squash -o compression=lz4 -o checksum=fletcher4 tank/bench
export BUILD OUT CPID CAIRN_STATE GIB RUNS FILES V4_CHUNK V4_DEPTH META DATA
export CARGS3="nfsport=$P&mountport=$((P + 1))&version=3" CARGS4="nfsport=$P&version=4"

if command -v ganesha.nfsd >/dev/null && command -v rpcbind >/dev/null; then
    PEER_DIR=$BENCH_DIR/ganesha PEER_REUSE_RPCBIND=1 bash "$PEERS/peer-ganesha.sh" -- bash "$0" --inner
    rm -rf "$BENCH_DIR/ganesha"
else
    echo "# nfs-ganesha or rpcbind missing: apt-get install -y nfs-ganesha nfs-ganesha-vfs rpcbind" >&2
    bash "$0" --inner
fi
kill "$CPID"; wait "$CPID" 2>/dev/null || true
trap - EXIT
rm -rf "$CAIRN_STATE"
echo "end $(date -u +%FT%TZ) load $(cat /proc/loadavg)" >>"$OUT/conditions.txt"
python3 "$SRC/tools/bench/nfs-throughput-report.py" "$OUT/results.tsv" | tee "$OUT/report.md"
cat "$OUT/conditions.txt"
