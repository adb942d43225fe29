#!/usr/bin/env bash
# Page faults of cairnd's NFSv3 read path (issue 27, goal 1): minor faults per
# GiB read, counted from /proc/PID/stat (field 10, minflt) around each read, so
# the figure does not depend on how busy the machine is (wall time does; the
# CPU-s/GiB printed beside it is noisy under load). Never pass/fail.
#
#   tools/bench/nfs-read-faults.sh [BUILD_DIR]      (as root; default: build)
#
# One cairnd on a sparse file-backed pool (lz4, fletcher4), then:
#   write   nfs-cp of GIB GiB (half random, half text) into a new file
#   warm    nfs-cat of it right after the write (the ARC filling from the write)
#   cold    export + import (the ARC empty), nfs-cat again
#   cold2   export + import, nfs-cat a second time (memory the first cold read
#           took is available to reuse)
#   fresh   cairnd restarted (the pool comes back from its cache), nfs-cat: the
#           first fill of an empty process, no memory to reuse
# Environment: GIB (1), ARC (arc_max; default 8G as nfs-throughput.sh, so the file
# fits; "auto" leaves arc_max unset), BENCH_DIR (/var/tmp/cairn-nfs-faults),
# PERF=1 records a perf profile of cairnd over each phase
# (BENCH_DIR/perf-*.data, top lines printed; PERF_OPTS: perf record's call-graph
# options, default -g), WRITE_ONLY=1 stops after the write phase (the A/B of the
# write path: alternate two builds' runs), WARM_ONLY=1 stops after the warm read
# and a second one (warm2: the same ARC buffers sent a second time).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
GIB=${GIB:-1}; ARC=${ARC:-8G}
BENCH_DIR=${BENCH_DIR:-/var/tmp/cairn-nfs-faults}
S=$BENCH_DIR/state; DATA=$BENCH_DIR/data-$GIB.bin
rm -rf "$S"; mkdir -p "$S"
[ -f "$DATA" ] || python3 - "$DATA" "$GIB" <<'PY'
import os, sys
path, gib = sys.argv[1], int(sys.argv[2])
chunk = os.urandom(1 << 19) + (b"cairn benchmark text line 0123456789\n" * 14170)[: 1 << 19]
with open(path, "wb") as f:
    for _ in range(gib << 10): f.write(chunk)
PY
truncate -s 16G "$S/pool.img"
P=$((30000 + RANDOM % 20000))
{
    echo "state_dir = $S"; echo "socket = $S/sock"
    echo "nfs_listen = 127.0.0.1:$P"; echo "mount_listen = 127.0.0.1:$((P + 1))"
    echo "portmap_listen = 127.0.0.1:$((P + 2))"; echo "iscsi_listen = 127.0.0.1:$((P + 3))"
    [ "$ARC" = auto ] || echo "arc_max = $ARC"
} >"$S/c.conf"
export CAIRN_SOCKET=$S/sock
start_cairnd() {
    "$BUILD/cairnd" --config "$S/c.conf" --foreground 2>>"$S/log" &
    CPID=$!
    for _ in $(seq 100); do "$BUILD/cairn" pool list >/dev/null 2>&1 && break; sleep 0.1; done
}
start_cairnd
trap 'kill $CPID 2>/dev/null || true; wait 2>/dev/null || true' EXIT
"$BUILD/cairn" pool create tank "$S/pool.img"
"$BUILD/cairn" create -o sharenfs=no_root_squash -o compression=lz4 -o checksum=fletcher4 tank/b
URL="nfs://127.0.0.1/tank/b/f?nfsport=$P&mountport=$((P + 1))&version=3"
ticks=$(getconf CLK_TCK)
stat_of() { awk '{print $10, $14 + $15}' "/proc/$CPID/stat"; }
rss_of() { awk '/VmRSS/ {print $2}' "/proc/$CPID/status"; }
cold() { "$BUILD/cairn" pool export tank; "$BUILD/cairn" pool import -d "$S" tank; }
printf '%-6s %12s %10s %10s %8s\n' phase faults/GiB CPU-s/GiB RSS-MiB load1
phase() { # NAME COMMAND...
    local name=$1 f0 c0 f1 c1 pd=
    shift
    read -r f0 c0 < <(stat_of)
    if [ "${PERF:-0}" = 1 ]; then
        perf record -q ${PERF_OPTS:--g} -p "$CPID" -o "$BENCH_DIR/perf-$name.data" 2>/dev/null & pd=$!
        sleep 0.5
    fi
    "$@" >/dev/null
    [ -z "$pd" ] || { kill -INT $pd; wait $pd 2>/dev/null || true; }
    read -r f1 c1 < <(stat_of)
    printf '%-6s %12.0f %10.3f %10.0f %8s\n' "$name" "$(echo "($f1 - $f0) / $GIB" | bc -l)" \
        "$(echo "($c1 - $c0) / $ticks / $GIB" | bc -l)" "$(($(rss_of) / 1024))" \
        "$(cut -d' ' -f1 /proc/loadavg)"
}
phase write nfs-cp "$DATA" "$URL"
if [ "${WRITE_ONLY:-0}" = 1 ]; then
    "$BUILD/cairn" arcstat 2>/dev/null | head -5 || true
    if [ "${PERF:-0}" = 1 ]; then
        echo "== perf write (self, top 15)"
        perf report -i "$BENCH_DIR/perf-write.data" --no-children --sort sym --stdio 2>/dev/null |
            grep -E '^ +[0-9]' | head -15
    fi
    exit 0
fi
phase warm nfs-cat "$URL"
if [ "${WARM_ONLY:-0}" = 1 ]; then
    phase warm2 nfs-cat "$URL"
    if [ "${PERF:-0}" = 1 ]; then
        for n in warm warm2; do
            echo "== perf $n (self, top 12)"
            perf report -i "$BENCH_DIR/perf-$n.data" --no-children --sort sym --stdio 2>/dev/null |
                grep -E '^ +[0-9]' | head -12
        done
    fi
    exit 0
fi
cold
phase cold nfs-cat "$URL"
cold
phase cold2 nfs-cat "$URL"
kill "$CPID"; wait "$CPID" 2>/dev/null || true
start_cairnd
for _ in $(seq 100); do "$BUILD/cairn" list tank/b >/dev/null 2>&1 && break; sleep 0.1; done
phase fresh nfs-cat "$URL"
"$BUILD/cairn" arcstat 2>/dev/null | head -5 || true
if [ "${PERF:-0}" = 1 ]; then
    for n in write warm cold fresh; do
        echo "== perf $n (self, top 12)"
        perf report -i "$BENCH_DIR/perf-$n.data" --no-children --sort sym --stdio 2>/dev/null |
            grep -E '^ +[0-9]' | head -12
    done
fi
