#!/usr/bin/env bash
# NFS server CPU per GiB of two Cairn builds, side by side in one run:
#
#   tools/bench/nfs-cpu-ab.sh BASE_BUILD NEW_BUILD          (results on stdout, TSV)
#
# Each build's cairnd serves its own pool (an 8 GiB sparse file, compression off) on
# its own ports; RUNS times, builds alternating, MIB MiB of random data is written with
# nfs-cp (NFSv3) and read twice with nfs-cat (warm: from the ARC, mostly on the I/O
# thread). Per step: the server's CPU-s/GiB (utime+stime from /proc/PID/stat) and the
# wall time. Why: to see what a change on the NFS hot path (e.g. the management
# plane's counters) costs in CPU, the figure a shared machine disturbs least; never
# pass/fail. Environment: RUNS (5), MIB (512), BENCH_DIR (/var/tmp/cairn-nfs-cpu-ab);
# BASE_CONF / NEW_CONF: lines for that side's cairnd.conf (e.g. "analytics = 0": one
# build compared with its analytics off and on), BASE_ANALYTICS / NEW_ANALYTICS:
# drill-downs that side enables after start ("nfs3.ops:file nfs3.ops:client").
set -euo pipefail
BASE=$(cd "$1" && pwd); NEW=$(cd "$2" && pwd); RUNS=${RUNS:-5}; MIB=${MIB:-512}
D=${BENCH_DIR:-/var/tmp/cairn-nfs-cpu-ab}
rm -rf "$D"; mkdir -p "$D"
declare -A PID PORT
stop_all() { for p in "${PID[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$D"; }
trap stop_all EXIT
start() { # NAME BUILD PORT CONF ANALYTICS
    local s=$D/$1 a
    mkdir -p "$s"
    truncate -s 8G "$s/disk"
    printf '%s\n' "$4" >"$s/cairnd.conf"
    "$2/cairnd" --foreground --config "$s/cairnd.conf" --state-dir "$s" --socket "$s/sock" --nfs-listen "127.0.0.1:$3" \
        --mount-listen "127.0.0.1:$(($3 + 1))" --portmap-listen "127.0.0.1:$(($3 + 2))" \
        --iscsi-listen "127.0.0.1:$(($3 + 3))" 2>"$s/log" &
    PID[$1]=$!
    PORT[$1]=$3
    for _ in $(seq 100); do CAIRN_SOCKET=$s/sock "$NEW/cairn" pool list >/dev/null 2>&1 && break; sleep 0.1; done
    CAIRN_SOCKET=$s/sock "$NEW/cairn" pool create tank "$s/disk"
    CAIRN_SOCKET=$s/sock "$NEW/cairn" create -o sharenfs=no_root_squash -o compression=off tank/fs
    for a in $5; do CAIRN_SOCKET=$s/sock "$NEW/cairn" analytics enable "${a%%:*}" --by "${a#*:}"; done
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
url() { echo "nfs://127.0.0.1/tank/fs/$2?nfsport=${PORT[$1]}&mountport=$((PORT[$1] + 1))&version=3"; }
start base "$BASE" 26100 "${BASE_CONF:-}" "${BASE_ANALYTICS:-}"
start new "$NEW" 26200 "${NEW_CONF:-}" "${NEW_ANALYTICS:-}"
head -c $((MIB << 20)) /dev/urandom >"$D/data"
TCK=$(getconf CLK_TCK)
echo "# $(date -u +%FT%TZ) $(nproc) vCPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'run\tserver\top\tcpu_s_per_gib\twall_s\n'
for r in $(seq "$RUNS"); do
    for s in base new; do
        c0=$(cpu_ticks "${PID[$s]}"); t0=$(date +%s.%N)
        nfs-cp "$D/data" "$(url $s f$r)" >/dev/null
        c1=$(cpu_ticks "${PID[$s]}"); t1=$(date +%s.%N)
        nfs-cat "$(url $s f$r)" >/dev/null
        nfs-cat "$(url $s f$r)" >/dev/null
        c2=$(cpu_ticks "${PID[$s]}"); t2=$(date +%s.%N)
        awk -v r="$r" -v s="$s" -v a="$c0" -v b="$c1" -v c="$c2" -v t0="$t0" -v t1="$t1" \
            -v t2="$t2" -v m="$MIB" -v k="$TCK" 'BEGIN {
            printf "%d\t%s\twrite\t%.3f\t%.2f\n", r, s, (b - a) / k / (m / 1024), t1 - t0
            printf "%d\t%s\tread\t%.3f\t%.2f\n", r, s, (c - b) / k / (2 * m / 1024), t2 - t1 }'
    done
done
echo "# done, load: $(cut -d' ' -f1-3 /proc/loadavg)"
