#!/usr/bin/env bash
# Resilver benchmark (issue 25), never pass/fail; rows for docs/benchmarks.md.
#
#  1. The device's sequential rate: copying one file of DIR to another with dd, 1 MiB
#     O_DIRECT reads and writes (what a sequential rebuild does: read a side, write the
#     new one), and fio's 1 MiB O_DIRECT sequential write rate for reference.
#  2. Rebuild rate on an idle pool: a one-disk pool holding DATA_MB of files (written
#     through NFS), then `pool attach -s` of a second file: bytes resilvered / seconds
#     between the daemon's "attached" and "resilver finished (sequential)" log lines;
#     the same for the healing resilver (`attach` without -s).
#  3. Client throughput during a resilver: an NFS client writes CLIENT_MB into the
#     two-way mirror and reads CLIENT_MB of the pool's files back, once on the idle
#     pool and once right after `pool replace` of a side started a (healing) resilver
#     (default throttle settings); the run counts only if the resilver was still in
#     progress when the client finished.
# Each figure is the median of RUNS runs. BENCH_PARTS (default "device rebuild client")
# picks the parts to run (BENCH_MODES: "sequential healing", the rebuild part's modes); rebuild
# and client need device's figure only for the ratio. DIR should be on a real disk, not tmpfs.
# DATA_MB must be at least twice CLIENT_MB (the reads take two sets of files).
# Usage: tools/bench/resilver.sh [DIR] [DATA_MB] [CLIENT_MB] [RUNS]
set -euo pipefail
DIR=${1:-/var/tmp}; DATA=${2:-512}; CLIENT=${3:-256}; RUNS=${4:-3}
BUILD=${BUILD:-build}
CAIRND=$(realpath "$BUILD/cairnd"); CAIRN=$(realpath "$BUILD/cairn")
NFSCLIENT=$(realpath "$BUILD/nfs_client")
W=$(mktemp -d "$DIR/resilver-bench.XXXXXX")
PID=
cleanup() { [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
DISK=$(( (DATA * 2 > 1024 ? DATA * 2 : 1024) ))M   # leaf size: room for the data twice

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
now() { date +%s.%N; }

start_daemon() {
    local p=$((20000 + RANDOM % 20000))
    export CAIRN_SOCKET="$W/state/cairnd.sock"
    mkdir -p "$W/state"
    "$CAIRND" --foreground --config "$W/cairnd.conf" --state-dir "$W/state" --socket "$CAIRN_SOCKET" \
        --nfs-listen "127.0.0.1:$p" --mount-listen "127.0.0.1:$((p + 1))" \
        --portmap-listen "127.0.0.1:$((p + 2))" --iscsi-listen "127.0.0.1:$((p + 3))" \
        2>>"$W/daemon.log" &
    PID=$!
    NFSPORT=$p; MOUNTPORT=$((p + 1))
    for _ in $(seq 300); do "$CAIRN" pool list >/dev/null 2>&1 && return; sleep 0.1; done
    echo "cairnd did not start: $(tail -3 "$W/daemon.log")" >&2; exit 1
}
stop_daemon() { kill -TERM "$PID"; wait "$PID" || true; PID=; rm -rf "$W/state"; }
url() { echo "nfs://127.0.0.1/bench/fs?nfsport=$NFSPORT&mountport=$MOUNTPORT&version=3"; }

# new_pool: a one-disk pool with DATA MiB of incompressible files in bench/fs.
new_pool() {
    rm -f "$W"/leaf*; truncate -s "$DISK" "$W/leaf1" "$W/leaf2" "$W/leaf3"
    "$CAIRN" pool create bench "$W/leaf1"
    "$CAIRN" create -o sharenfs=no_root_squash -o compression=off bench/fs
    local i
    for i in $(seq 1 $((DATA / 64))); do "$NFSCLIENT" "$(url)" putfile "f$i" "$W/src64"; done
}

# log_secs PATTERN_START PATTERN_END FROM_LINE: seconds between the two log lines.
log_secs() {
    local a b
    for _ in $(seq 6000); do
        tail -n +"$3" "$W/daemon.log" | grep -q -E "$2" && break; sleep 0.05
    done
    a=$(tail -n +"$3" "$W/daemon.log" | grep -m1 -E "$1" | cut -d' ' -f1)
    b=$(tail -n +"$3" "$W/daemon.log" | grep -m1 -E "$2" | cut -d' ' -f1)
    echo "$(date -d "$b" +%s.%N) - $(date -d "$a" +%s.%N)" | bc -l
}

# A small ARC: client reads reach the disks.
# BENCH_CONF: more cairnd.conf lines, e.g. BENCH_CONF='resilver_delay_ms = 10'.
printf 'arc_max = 16M\n%s\n' "${BENCH_CONF:-}" >"$W/cairnd.conf"
head -c $((64 << 20)) /dev/urandom >"$W/src64"
head -c $((CLIENT << 20)) /dev/urandom >"$W/client"

PARTS=${BENCH_PARTS:-device rebuild client}
part() { [[ " $PARTS " == *" $1 "* ]]; }
DEV=0

# ---- 1. the device ----
if part device; then
dd_rates=(); fio_rates=()
for _ in $(seq "$RUNS"); do
    head -c $((DATA << 20)) /dev/urandom >"$W/a"; sync
    t0=$(now)
    dd if="$W/a" of="$W/b" bs=1M iflag=direct oflag=direct status=none
    t1=$(now)
    dd_rates+=("$(echo "$DATA / ($t1 - $t0)" | bc -l)")
    fio_rates+=("$(fio --name=w --filename="$W/b" --size="${DATA}M" --rw=write --bs=1M --direct=1 \
        --ioengine=psync --output-format=terse --terse-version=3 | awk -F';' '{print $48/1024}')")
    rm -f "$W/a" "$W/b"
done
DEV=$(printf '%s\n' "${dd_rates[@]}" | median)
printf 'device copy (dd 1 MiB direct)   %8.0f MB/s\n' "$DEV"
printf 'device write (fio 1 MiB direct) %8.0f MB/s\n' "$(printf '%s\n' "${fio_rates[@]}" | median)"
fi

# ---- 2. rebuild and resilver rates, idle pool ----
part rebuild && for mode in ${BENCH_MODES:-sequential healing}; do
    rates=()
    for _ in $(seq "$RUNS"); do
        start_daemon
        new_pool
        "$CAIRN" pool wait bench >/dev/null 2>&1 || true
        from=$(($(wc -l <"$W/daemon.log") + 1))
        if [ "$mode" = sequential ]; then
            "$CAIRN" pool attach -s bench "$W/leaf1" "$W/leaf2"; end='resilver finished \(sequential\)'
        else
            "$CAIRN" pool attach bench "$W/leaf1" "$W/leaf2"; end='resilver finished:'
        fi
        secs=$(log_secs 'attached to' "$end" "$from")
        line=$(tail -n +"$from" "$W/daemon.log" | grep -m1 -E "$end")
        bytes=$(sed -E 's/.*[:,] ([0-9]+) bytes resilvered.*|.* ([0-9]+) resilvered.*/\1\2/' <<<"$line")
        rates+=("$(echo "$bytes / 1048576 / $secs" | bc -l)")
        "$CAIRN" pool wait bench >/dev/null 2>&1 || true
        stop_daemon
    done
    r=$(printf '%s\n' "${rates[@]}" | median)
    printf 'resilver %-10s %8.0f MB/s  = %3.0f%% of the device copy (%d MiB of data)\n' \
        "$mode" "$r" "$(echo "if ($DEV > 0) 100 * $r / $DEV else 0" | bc -l)" "$DATA"
done

# ---- 3. client writes and reads with and without a resilver ----
# Reads: CLIENT MiB of the pool's files from file number $1 on (the idle and the
# busy run read different ones; the ARC is 16 MiB), read back whole with nfs-cat.
read_files() {
    local i
    for i in $(seq "$1" $(($1 + CLIENT / 64 - 1))); do
        nfs-cat "nfs://127.0.0.1/bench/fs/f$i?nfsport=$NFSPORT&mountport=$MOUNTPORT&version=3" >/dev/null
    done
}
resilvering() { "$CAIRN" pool status bench | grep -q 'resilver in progress'; }
declare -A R=()
skipped=0
part client && for _ in $(seq "$RUNS"); do
    start_daemon
    new_pool
    "$CAIRN" pool attach bench "$W/leaf1" "$W/leaf2"
    "$CAIRN" pool wait -t resilver bench
    # Reads first: a write's txg sync would still be running under them.
    t0=$(now); read_files 1; t1=$(now)
    R[read_idle]+="$(echo "$CLIENT / ($t1 - $t0)" | bc -l) "
    t0=$(now); "$NFSCLIENT" "$(url)" putfile idle "$W/client"; t1=$(now)
    R[write_idle]+="$(echo "$CLIENT / ($t1 - $t0)" | bc -l) "
    sleep 6 # the write's txg synced (txg_timeout 5 s)
    "$CAIRN" pool replace bench "$W/leaf2" "$W/leaf3"
    t0=$(now); read_files $((CLIENT / 64 + 1)); t1=$(now)
    r=$(echo "$CLIENT / ($t1 - $t0)" | bc -l)
    t0=$(now); "$NFSCLIENT" "$(url)" putfile busy "$W/client"; t1=$(now)
    w=$(echo "$CLIENT / ($t1 - $t0)" | bc -l)
    if resilvering; then
        R[write_busy]+="$w "; R[read_busy]+="$r "
    else
        skipped=$((skipped + 1))
    fi
    "$CAIRN" pool wait -t resilver bench
    stop_daemon
done
part client && for op in write read; do
    i=$(tr ' ' '\n' <<<"${R[${op}_idle]}" | grep . | median)
    printf 'client NFS %-5s idle pool      %8.0f MB/s\n' "$op" "$i"
    if [ -n "${R[${op}_busy]:-}" ]; then
        b=$(tr ' ' '\n' <<<"${R[${op}_busy]}" | grep . | median)
        printf 'client NFS %-5s resilvering    %8.0f MB/s  = %3.0f%% (%d runs skipped: the resilver ended first)\n' \
            "$op" "$b" "$(echo "100 * $b / $i" | bc -l)" "$skipped"
    else
        echo "client NFS $op, resilvering: every resilver ended before the client; raise DATA_MB"
    fi
done
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /cpu: /'
echo "cpus: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); runs: $RUNS; dir: $DIR"
