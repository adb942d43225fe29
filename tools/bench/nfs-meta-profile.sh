#!/usr/bin/env bash
# Where one NFSv3 metadata call of the small-file benchmark spends its time, for one
# phase only (create or remove of empty files, one call in flight), never pass/fail:
#
#   tools/bench/nfs-meta-profile.sh [BUILD_DIR] [create|remove]     (default: build remove)
#
# Starts the build's cairnd on a fresh 4 GiB sparse pool (as nfs-meta.sh does), creates
# FILES files, then runs the profiled phase three times over (each on a fresh daemon):
#   1. counts per call: log writes (pwrite64), flushes (fdatasync), context switches,
#      and the server's CPU time (perf stat);
#   2. why the server's threads slept, per call: every sched_switch out of a thread
#      that blocked, grouped by thread and by the first Cairn frames of its stack;
#   3. a CPU profile (perf record -g --call-graph dwarf): the top functions, self
#      and with children;
#   4. the workers' log write (pwrite64) and flush (fdatasync) latencies, medians, split
#      by whether the pool's sync threads (spa_sync, dmu_sync, vdev_cq) switched within
#      2 ms of the call: a txg sync in progress, whose writes a flush waits for.
# A profiler slows the phase; the rates it prints are not the benchmark's.
# Environment: FILES (2000), BENCH_DIR (/var/tmp/cairn-nfs-meta-profile), OUT (BENCH_DIR/out).
# Needs perf and libnfs-dev.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
PHASE=${2:-remove}
FILES=${FILES:-2000}
D=${BENCH_DIR:-/var/tmp/cairn-nfs-meta-profile}
OUT=${OUT:-$D/out}
mkdir -p "$D" "$OUT"
gcc -O2 -Wall -Wextra -o "$D/nfs_meta_phase" "$SRC/tools/bench/nfs_meta_phase.c" -lnfs
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$D/state"; }
trap cleanup EXIT

# up: a fresh daemon and pool with FILES files made (and, for the create phase, none).
up() {
    local s=$D/state P
    rm -rf "$s"; mkdir -p "$s"; truncate -s 4G "$s/pool.img"
    P=$((30000 + RANDOM % 20000))
    "$BUILD/cairnd" --foreground --state-dir "$s" --socket "$s/sock" --nfs-listen "127.0.0.1:$P" \
        --mount-listen "127.0.0.1:$((P + 1))" --portmap-listen "127.0.0.1:$((P + 2))" \
        --iscsi-listen "127.0.0.1:$((P + 3))" 2>"$s/cairnd.log" &
    pid=$!
    for _ in $(seq 1 100); do CAIRN_SOCKET=$s/sock "$BUILD/cairn" pool list >/dev/null 2>&1 && break; sleep 0.1; done
    CAIRN_SOCKET=$s/sock "$BUILD/cairn" pool create bench "$s/pool.img"
    CAIRN_SOCKET=$s/sock "$BUILD/cairn" create -o sharenfs=no_root_squash bench/m
    URL="nfs://127.0.0.1/bench/m?nfsport=$P&mountport=$((P + 1))&version=3"
    if [ "$PHASE" = remove ]; then "$D/nfs_meta_phase" "$URL" create "$FILES" >/dev/null; fi
}
down() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; rm -rf "$D/state"; }
run_phase() { "$D/nfs_meta_phase" "$URL" "$PHASE" "$FILES"; }

# 1. counts
up
perf stat -x, -o "$OUT/stat.txt" -e syscalls:sys_enter_pwrite64,syscalls:sys_enter_fdatasync \
    -e syscalls:sys_enter_sendmsg,context-switches,task-clock -p "$pid" & sp=$!
sleep 0.5; run_phase; kill -INT $sp; wait $sp || true
down
echo "# per $PHASE call (whole server, $FILES calls):"
grep -v '^#' "$OUT/stat.txt" | grep . | awk -F, -v n="$FILES" '{printf "%-32s %8.3f%s\n", $3, $1 / n, $3 == "task-clock" ? " ms CPU" : ""}'

# 2. sleeps
up
perf record -q -e sched:sched_switch --call-graph dwarf,8192 -o "$OUT/sleeps.data" -p "$pid" 2>/dev/null & pp=$!
sleep 1; run_phase; kill -INT $pp; wait $pp || true
down
echo "# sleeps per $PHASE call: thread, where (first Cairn frames)"
perf script -i "$OUT/sleeps.data" -F comm,trace,ip,sym 2>/dev/null | python3 -c '
import collections, re, sys
n = int(sys.argv[1]); count = collections.Counter()
for blk in sys.stdin.read().split("\n\n"):
    lines = [l for l in blk.split("\n") if l.strip()]
    m = re.match(r"\s*(\S+)\s+.*prev_state=(\S)", lines[0]) if lines else None
    if not m or m.group(2) not in "SD": continue
    syms = [l.split()[-1] for l in lines[1:]]
    user = syms[syms.index("entry_SYSCALL_64_after_hwframe") + 1:] if "entry_SYSCALL_64_after_hwframe" in syms else syms[:3]
    user = [s for s in user if s not in ("(inlined)", "[unknown]") and not re.match(r"(__|pthread_|___pthread|futex|lll_|syscall)", s)]
    count[(re.sub(r"\d+", "N", m.group(1)), " < ".join(user[:4]))] += 1
for (thread, where), c in count.most_common(12): print(f"{c / n:6.2f}  {thread:12s} {where[:110]}")
' "$FILES"

# 3. CPU
up
perf record -q -g --call-graph dwarf,16384 -F 2000 -o "$OUT/cpu.data" -p "$pid" 2>/dev/null & pp=$!
sleep 1; run_phase; kill -INT $pp; wait $pp || true
down
echo "# CPU, with children (top 30)"
perf report -i "$OUT/cpu.data" --children --sort sym --stdio -g none 2>/dev/null | grep -v '^#' | grep . | awk 'NR <= 30' || true

# 4. log I/O latency, with and without a txg sync around
up
perf record -q -e syscalls:sys_enter_fdatasync,syscalls:sys_exit_fdatasync,syscalls:sys_enter_pwrite64 \
    -e syscalls:sys_exit_pwrite64,sched:sched_switch -o "$OUT/lat.data" -p "$pid" 2>/dev/null & pp=$!
sleep 1; run_phase; kill -INT $pp; wait $pp || true
down
echo "# log I/O of the $PHASE calls: median latency while a txg sync runs / otherwise"
perf script -i "$OUT/lat.data" -F comm,tid,time,event,trace 2>/dev/null | python3 -c '
import bisect, re, statistics, sys
start, io, sync = {}, [], []
for l in sys.stdin:
    m = re.match(r"\s*(\S+)\s+(\d+)\s+([\d.]+):\s+(\S+):", l)
    if not m: continue
    comm, tid, t, ev = m.group(1), m.group(2), float(m.group(3)), m.group(4)
    if ev == "sched:sched_switch":
        if re.search(r"prev_comm=(spa_sync|dmu_sync|vdev_cq)", l): sync.append(t)
        continue
    if not comm.startswith("nfs/"): continue
    kind = "flush (fdatasync)" if "fdatasync" in ev else "write (pwrite64)"
    if "enter" in ev: start[(tid, kind)] = t
    elif (tid, kind) in start: t0 = start.pop((tid, kind)); io.append((t0, t - t0, kind))
sync.sort()
def busy(t):
    i = bisect.bisect_left(sync, t - 0.002)
    return i < len(sync) and sync[i] <= t + 0.002
for kind in ("write (pwrite64)", "flush (fdatasync)"):
    a = [d * 1e6 for t, d, k in io if k == kind and busy(t)]
    b = [d * 1e6 for t, d, k in io if k == kind and not busy(t)]
    med = lambda v: statistics.median(v) if v else 0
    print(f"{kind:18s} sync running: {len(a):5d} calls, median {med(a):6.0f} us | otherwise: {len(b):5d}, median {med(b):6.0f} us")
'
