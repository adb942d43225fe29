#!/usr/bin/env bash
# iscsi-write-ab.sh: iSCSI writes of two (or more) Cairn builds, alternating, each
# run on a fresh daemon; CPU counted until the last txg has synced. Never pass/fail.
#
#   tools/bench/iscsi-write-ab.sh KIND [LABEL=]BUILD_DIR...
#     KIND       randwrite (4 KiB random, 32 in flight) or seqwrite (128 KiB, 32 in flight)
#     BUILD_DIR  builds to compare; LABEL=BUILD_DIR names one (default: the directory);
#                CONF_<LABEL> (environment) adds cairnd.conf lines for that one, so one
#                build can run twice: CONF_off="analytics = 0" off=build on=build
#   knobs: RUNS=2 SECS=10 SCRATCH=/var/tmp/cairn-iscsi-ab PORT=24270 ARC_MAX=4G
#          DIRTY_MAX= (empty: the pool's default; e.g. 2400M sets it on every pool)
#          PRE_RANDOM=0 (seconds of 4 KiB random writes after the fill, before the rest)
#
# Per run and build: an 8 GiB file pool in SCRATCH, a 2 GiB volume as LUN 0, filled
# by 10 s of 128 KiB writes; 6 s of rest; then iscsi_writeperf for SECS seconds. The
# daemon's utime+stime (/proc/PID/stat) is read before, right after, and 7 s after
# the run (past the 5 s txg timeout, so the txg the run left dirty has synced):
# "cpu_us/op" is the window, "with tail" includes that last sync - the fair figure
# when builds differ in how much they leave dirty.
# PRE_RANDOM=24 measures a LUN as iscsi-perf.sh leaves it for its sequential writes:
# after random writes, which fragment the pool's free space and the allocator's heap,
# a 128 KiB write costs up to a third more CPU than on a LUN only written
# sequentially (docs/benchmarks.md, session 13).
set -euo pipefail
KIND=${1:?usage: iscsi-write-ab.sh randwrite|seqwrite BUILD_DIR...}
shift
[ $# -ge 1 ] || { echo "give at least one build directory" >&2; exit 2; }
case $KIND in randwrite | seqwrite) ;; *) echo "KIND must be randwrite or seqwrite" >&2; exit 2 ;; esac
RUNS=${RUNS:-2} SECS=${SECS:-10} S=${SCRATCH:-/var/tmp/cairn-iscsi-ab} PORT=${PORT:-24270}
ARC_MAX=${ARC_MAX:-4G}
source "$(dirname "$0")/iscsi-cairn.sh"
IQN=$CAIRN_BENCH_IQN
tck=$(getconf CLK_TCK)
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }

for r in $(seq 1 "$RUNS"); do
    for spec in "$@"; do
        label=${spec%%=*} b=${spec#*=}
        [ "$label" = "$spec" ] && label=$b
        b=$(cd "$b" && pwd)
        rm -rf "$S"
        mkdir -p "$S"
        conf_var=CONF_$label
        pid=$(CAIRND_CONF_EXTRA=${!conf_var:-} cairn_lun_start "$b" "$S" "$PORT" 2G "$ARC_MAX" 10 "${DIRTY_MAX:-}")
        [ "${PRE_RANDOM:-0}" -gt 0 ] && "$b/iscsi_writeperf" -r 127.0.0.1:$PORT $IQN 0 8 32 "$PRE_RANDOM" >/dev/null
        sleep 6
        c0=$(cpu_of "$pid")
        if [ "$KIND" = randwrite ]; then
            out=$("$b/iscsi_writeperf" -r 127.0.0.1:$PORT $IQN 0 8 32 "$SECS")
            blk=4096
        else
            out=$("$b/iscsi_writeperf" 127.0.0.1:$PORT $IQN 0 256 32 "$SECS")
            blk=131072
        fi
        c1=$(cpu_of "$pid")
        sleep 7
        c2=$(cpu_of "$pid")
        iops=$(awk '{print $2}' <<<"$out") bytes=$(awk '{print $6}' <<<"$out")
        printf '%s run %d: %s IOPS, cpu_us/op %s, with tail %s, rss %s KiB, load %s\n' "$label" "$r" "$iops" \
            "$(awk -v c=$((c1 - c0)) -v t="$tck" -v b="$bytes" -v k=$blk 'BEGIN{printf "%.1f", c/t/(b/k)*1e6}')" \
            "$(awk -v c=$((c2 - c0)) -v t="$tck" -v b="$bytes" -v k=$blk 'BEGIN{printf "%.1f", c/t/(b/k)*1e6}')" \
            "$(awk '/VmHWM/{print $2}' "/proc/$pid/status")" "$(cut -d' ' -f1 /proc/loadavg)"
        kill "$pid"
        while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    done
done
