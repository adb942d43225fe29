#!/usr/bin/env bash
# sync-writes.sh: 4 KiB synchronous writes, what the intent log buys (issue 6).
#
#   tools/bench/sync-writes.sh [DIR]     DIR: scratch dir on the disk under test
#                                         (default /var/tmp/cairn-bench-sync)
# Knobs (environment): SECS=15 per run, REPS=3 (medians), QDS="1 32",
#   SLOW_US=8000 extra microseconds per cache flush of the emulated slow main disk,
#   BS=4096 bytes per write (above 4 KiB the volume has 8 KiB records),
#   BUILD=./build (where tools/bench/bench_zvol_syncwrites was built),
#   BEFORE=DIR: another build of bench_zvol_syncwrites (e.g. of the previous commit)
#   whose log-device mode runs interleaved with the others as column "before".
#
# Columns, side by side in one run (each cell the median of REPS runs, modes
# interleaved so machine noise hits them alike):
#   limit  pwrite 4 KiB (O_DIRECT) + fdatasync per write on a file in DIR (the log device's own
#          limit: the same disk, the same file system as the log device file)
#   txg    volume writes with FUA on a pool of one slow main disk, the intent log
#          disabled: every sync write waits for a txg sync (the behaviour before the log)
#   nolog  the same pool, intent log on the main disk (no log device)
#   log    the same pool plus a log device (a plain file in DIR)
#   before log, built from BEFORE (only with BEFORE)
# Each cell is "writes/s (CPU us per write)": the CPU figure (user + system of the
# whole process, txg syncs included) is the steady one on a loaded machine.
# Slow main disk: the pool's main vdev is a fault leaf (fault:FILE) whose every cache
# flush sleeps SLOW_US more (vdev_fault_set_flush_delay), like a 7200 rpm disk's flush.
# The leaf holds writes in memory until a flush and then writes them to FILE with
# O_DIRECT, so its own CPU (charged to this process) stays small, as a real disk's would.
# A benchmark, not a test.
set -u
DIR=${1:-/var/tmp/cairn-bench-sync}
# 15 s: a run must pay for the txg syncs of its own writes. In 5 s the first
# sync (after the 5 s txg timeout) mostly fell outside the window, and 32 in
# flight read 46.6k against 36.3k writes/s over 15 s.
SECS=${SECS:-15}
REPS=${REPS:-3}
QDS=${QDS:-1 32}
SLOW_US=${SLOW_US:-8000}
BS=${BS:-4096}
BUILD=${BUILD:-$(dirname "$0")/../../build}
BIN="$BUILD/tools/bench/bench_zvol_syncwrites"
[ -x "$BIN" ] || { echo "build first: $BIN not found" >&2; exit 1; }
MODES="limit txg nolog log"
if [ -n "${BEFORE:-}" ]; then
    [ -x "$BEFORE/tools/bench/bench_zvol_syncwrites" ] || { echo "no bench in $BEFORE" >&2; exit 1; }
    MODES="$MODES before"
fi
mkdir -p "$DIR"
declare -A res cpu
for qd in $QDS; do
    for rep in $(seq 1 "$REPS"); do
        for mode in $MODES; do
            b=$BIN m=$mode
            [ "$mode" = before ] && b="$BEFORE/tools/bench/bench_zvol_syncwrites" m=log
            line=$("$b" -d "$DIR" -t "$SECS" -q "$qd" -s "$SLOW_US" -b "$BS" "$m")
            v=$(echo "$line" | sed -n 's/.*iops=\([0-9]*\).*/\1/p')
            c=$(echo "$line" | sed -n 's/.*cpu_us=\([0-9.]*\).*/\1/p')
            res[$mode,$qd]="${res[$mode,$qd]:-} $v"
            cpu[$mode,$qd]="${cpu[$mode,$qd]:-} ${c:-0}"
            echo "run $rep: $mode qd=$qd $v ${c:-?} us/write (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        done
    done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo
echo "$BS-byte sync writes/s (CPU us per write), medians of $REPS x ${SECS} s; main disk flush +${SLOW_US} us"
echo
hdr="| in flight | limit (fdatasync on the log device file) | txg (no log) | log on main disk | log device |"
sep="|---|---|---|---|---|"
[ -n "${BEFORE:-}" ] && hdr="$hdr log device, before |" && sep="$sep---|"
echo "$hdr log device / limit | log device / log on main |"
echo "$sep---|---|"
for qd in $QDS; do
    row="| $qd |"
    for mode in $MODES; do
        row="$row $(echo "${res[$mode,$qd]}" | median) ($(echo "${cpu[$mode,$qd]}" | median)) |"
    done
    l=$(echo "${res[limit,$qd]}" | median); n=$(echo "${res[nolog,$qd]}" | median)
    g=$(echo "${res[log,$qd]}" | median)
    echo "$row $(awk -v a="$g" -v b="$l" 'BEGIN{printf "%.0f%%", 100*a/b}') | $(awk -v a="$g" -v b="$n" 'BEGIN{printf "%.1fx", a/b}') |"
done
