#!/usr/bin/env bash
# iscsi-perf.sh: Cairn's iSCSI target side by side with tgt (tgtd serving a file on
# the same disk, /work/shared/peers/peer-tgt.sh): 4 KiB random and 128 KiB sequential,
# reads (libiscsi's iscsi-perf) and writes (tests/tools/iscsi_writeperf), 32 in flight.
# Each cell is the median of RUNS runs of SECS seconds; CPU is the target process's
# user+system seconds per GiB moved (from /proc/PID/stat). Never a pass/fail test.
#
# Cairn's arc_max is ARC_MAX (default 4G): the LUN fits in memory as tgt's file fits
# in the page cache; ARC_MAX=256M (cairnd's default) measures reads that miss.
#
#   tools/bench/iscsi-perf.sh BUILD_DIR [SCRATCH_DIR]
#   knobs: RUNS=3 SECS=8 SIZE=2G ARC_MAX=4G PEER=/work/shared/peers/peer-tgt.sh
set -euo pipefail
B=$(cd "${1:?usage: iscsi-perf.sh BUILD_DIR [SCRATCH_DIR]}" && pwd)
S=${2:-/tmp/cairn-iscsi-bench}
RUNS=${RUNS:-3}
SECS=${SECS:-8}
SIZE=${SIZE:-2G}
ARC_MAX=${ARC_MAX:-4G}
PEER=${PEER:-/work/shared/peers/peer-tgt.sh}
PORT=${PORT:-23260}
TPORT=${TPORT:-23261}
WP="$B/iscsi_writeperf"
rm -rf "$S"
mkdir -p "$S"

cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)

# run_one PID PORTAL IQN LUN KIND -> "iops mbps cpu_s_per_gib"
run_one() {
    local pid=$1 portal=$2 iqn=$3 lun=$4 kind=$5 c0 c1 out iops mbps bytes
    c0=$(cpu_of "$pid")
    case $kind in
    randread|seqread)
        local args=(-m 32 -b 8 -r); [ "$kind" = seqread ] && args=(-m 32 -b 256)
        out=$({ timeout -s INT "$SECS" iscsi-perf "${args[@]}" "iscsi://$portal/$iqn/$lun" 2>&1 || true; } | tr '\r' '\n' | grep 'iops average' | tail -n 1)
        iops=$(sed -E 's/.*iops average ([0-9]+).*/\1/' <<<"$out")
        local blk=4096; [ "$kind" = seqread ] && blk=131072
        mbps=$(awk -v i="$iops" -v b="$blk" 'BEGIN{printf "%.1f", i*b/1e6}')
        bytes=$(awk -v i="$iops" -v b="$blk" -v s="$SECS" 'BEGIN{printf "%.0f", i*b*s}')
        ;;
    randwrite) out=$("$WP" -r "$portal" "$iqn" "$lun" 8 32 "$SECS"); ;;
    seqwrite) out=$("$WP" "$portal" "$iqn" "$lun" 256 32 "$SECS"); ;;
    esac
    if [ "${kind%write}" != "$kind" ]; then
        iops=$(awk '{print $2}' <<<"$out"); mbps=$(awk '{print $4}' <<<"$out"); bytes=$(awk '{print $6}' <<<"$out")
    fi
    c1=$(cpu_of "$pid")
    awk -v i="$iops" -v m="$mbps" -v c=$((c1 - c0)) -v t="$tck" -v b="$bytes" \
        'BEGIN{g=b/1073741824; printf "%s %s %.2f\n", i, m, (g>0 ? c/t/g : 0)}'
}

# warm PORTAL IQN LUN: one sequential pass, so both targets start with the LUN
# in memory (tgt's file in the page cache, Cairn's records in the ARC).
warm() { timeout -s INT $((SECS * 3)) iscsi-perf -m 32 -b 256 "iscsi://$1/$2/$3" >/dev/null 2>&1 || true; }

median() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

# bench NAME PID PORTAL IQN LUN
bench() {
    local name=$1 pid=$2 portal=$3 iqn=$4 lun=$5 kind r
    for kind in randread randwrite seqread seqwrite; do
        : >"$S/$name.$kind"
        for r in $(seq 1 "$RUNS"); do run_one "$pid" "$portal" "$iqn" "$lun" "$kind" >>"$S/$name.$kind"; done
        printf '%s %s %s %s %s\n' "$name" "$kind" \
            "$(awk '{print $1}' "$S/$name.$kind" | median)" \
            "$(awk '{print $2}' "$S/$name.$kind" | median)" \
            "$(awk '{print $3}' "$S/$name.$kind" | median)" >>"$S/results"
    done
}

# ---- Cairn: a pool on a file in SCRATCH_DIR, a thick volume as LUN 0 ----
source "$(dirname "$0")/iscsi-cairn.sh"
IQN=$CAIRN_BENCH_IQN
trap '[ -f "$S/state/cairnd.pid" ] && kill "$(cat "$S/state/cairnd.pid")" 2>/dev/null || true' EXIT
cairn_lun_start "$B" "$S" "$PORT" "$SIZE" "$ARC_MAX" 15 >/dev/null
warm 127.0.0.1:$PORT $IQN 0
: >"$S/results"
bench cairn "$(cat "$S/state/cairnd.pid")" 127.0.0.1:$PORT $IQN 0
kill "$(cat "$S/state/cairnd.pid")"

# ---- tgt: a file on the same disk ----
if [ -x "$PEER" ] && command -v tgtd >/dev/null; then
    export PEER_DIR="$S/tgt" PEER_PORT=$TPORT PEER_SIZE=$SIZE PEER_TIMEOUT=0
    export -f bench run_one cpu_of median warm
    export S RUNS SECS WP tck
    "$PEER" bash -c '"$WP" "127.0.0.1:$PEER_PORT" "$PEER_IQN" "$PEER_LUN" 256 32 15 >/dev/null;
                     warm "127.0.0.1:$PEER_PORT" "$PEER_IQN" "$PEER_LUN";
                     bench tgt "$(cat "$PEER_DIR/tgtd.pid")" "127.0.0.1:$PEER_PORT" "$PEER_IQN" "$PEER_LUN"'
else
    echo "tgt not available: Cairn only" >&2
fi

echo "| target | workload | IOPS | MB/s | CPU s/GiB |"
echo "|---|---|---:|---:|---:|"
awk '{printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5}' "$S/results"
