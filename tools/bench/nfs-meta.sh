#!/usr/bin/env bash
# NFSv3 and NFSv4 small-file metadata rates (../shared/peers/nfs-meta-bench.c: create, stat,
# readdir, unlink; one op in flight) of one or more Cairn builds side by side with
# nfs-ganesha serving a plain directory on the same disk. Never pass/fail.
#
#   tools/bench/nfs-meta.sh [BUILD_DIR...]        (default: build)
#
# Several build directories compare builds (e.g. before and after a change). Each run
# measures every server in turn (builds in the order given, then ganesha), RUNS times,
# so all see the same machine load; prints the median of each figure and the server's
# CPU time (utime+stime from /proc) per file over all four phases.
# Environment: BENCH_DIR (/var/tmp/cairn-nfs-meta), BENCH_RUNS (3), BENCH_FILES (2000),
# BENCH_SIZES ("0 4096"), BENCH_VERS ("3 4": NFS versions; libnfs's v4 writes no file
# over ~3.9 KB, so v4 runs only 0 B files), BENCH_GANESHA (1; 0 skips it), BENCH_GANESHA_DIRSYNC (1; 0
# skips it). Needs libnfs-dev; the ganesha side needs root, nfs-ganesha, nfs-ganesha-vfs
# and rpcbind, its dirsync run also mkfs.ext4 and a loop device.
#
# Many clients. BENCH_CLIENTS (e.g. "1 4 16") adds a second table: NFSv3 CREATE and
# REMOVE of empty files by N clients at once (tools/bench/nfs-meta-conc.c: N processes,
# each its own connection, one call in flight and its own directory; phases start on a
# barrier), BENCH_CONC_FILES (2000) files in all, as aggregate ops/s and server CPU
# us/op, for every N on every server. BENCH_CONC_SHARED=1 adds rows with all N clients
# in one directory. Cairn gets a fresh pool for each N, and its rows carry the intent
# log's flushes per logged change (from the counters cairnd logs when it closes the
# log): below 1.0 when concurrent commits share a log write and flush.
#
# Two ganesha rows. "ganesha" serves a plain directory: its creates and removes
# return before anything reaches the disk, which RFC 1813 does not allow (CREATE,
# REMOVE and the other changes of the namespace are to be on stable storage before
# the reply); Cairn's are, through its intent log, one log write and flush each.
# "ganesha-dirsync" serves an ext4 file system (in a file on the same disk, through a
# loop device) mounted with dirsync, whose directory changes are written and flushed
# before each call returns: the same promise as Cairn's, so the same cost.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BENCH_DIR=${BENCH_DIR:-/var/tmp/cairn-nfs-meta}
RUNS=${BENCH_RUNS:-3}
FILES=${BENCH_FILES:-2000}
SIZES=${BENCH_SIZES:-0 4096}
VERS=${BENCH_VERS-3 4}
PEERS=$SRC/../shared/peers
[ -d "$PEERS" ] || PEERS=/work/shared/peers
META=$BENCH_DIR/nfs-meta-bench
CONC=$BENCH_DIR/nfs-meta-conc
CLIENTS=${BENCH_CLIENTS:-}
CONC_FILES=${BENCH_CONC_FILES:-2000}
CONC_MODES=own
[ "${BENCH_CONC_SHARED:-0}" = 1 ] && CONC_MODES="own shared"
RES=$BENCH_DIR/results
CRES=$BENCH_DIR/conc-results
ticks=$(getconf CLK_TCK)
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# meta NAME PID URL: one nfs-meta-bench run per size; appends "NAME SIZE key value" lines.
# meta NAME PID URL VERS: one run per file size; v4 only with 0 B files.
meta() {
    local name=$1-v$4 pid=$2 url=$3 size c0 c1 out
    for size in $SIZES; do
        [ "$4" = 4 ] && [ "$size" != 0 ] && continue
        c0=$(cpu_of "$pid")
        out=$("$META" "$url" "$FILES" "$size")
        c1=$(cpu_of "$pid")
        echo "$out" | awk -F= -v n="$name" -v s="$size" '/_per_sec=/ {print n, s, $1, $2}' >>"$RES"
        echo "$name $size cpu_ms_per_file $(printf "%.3f" "$(echo "($c1 - $c0) * 1000 / $ticks / $FILES" | bc -l)")" >>"$RES"
    done
}

# conc NAME PID URL: one nfs-meta-conc run per N and directory mode; appends
# "NAME N MODE key value" lines to $CRES.
conc() {
    local n mode
    for n in $CLIENTS; do
        for mode in $CONC_MODES; do conc_one "$@" "$n" "$mode"; done
    done
}
conc_one() {
    local name=$1 pid=$2 url=$3 n=$4 mode=$5
    "$CONC" "$url" "$n" "$CONC_FILES" "$pid" "$([ "$mode" = shared ] && echo shared)" |
        awk -F= -v n="$name" -v c="$n" -v m="$mode" '/_per_sec=|_per_op=/ {print n, c, m, $1, $2}' >>"$CRES"
}

# start_cairnd BUILD: a fresh pool "bench" with dataset bench/m shared; sets P and pid.
start_cairnd() {
    local build=$1 state=$BENCH_DIR/cairn
    rm -rf "$state"
    mkdir -p "$state"
    truncate -s 4G "$state/pool.img"
    P=$((30000 + RANDOM % 20000))
    "$build/cairnd" --foreground --state-dir "$state" --socket "$state/cairnd.sock" \
        --nfs-listen "127.0.0.1:$P" --mount-listen "127.0.0.1:$((P + 1))" \
        --portmap-listen "127.0.0.1:$((P + 2))" --iscsi-listen "127.0.0.1:$((P + 3))" \
        2>"$state/cairnd.log" &
    pid=$!
    trap "kill $pid 2>/dev/null || true" EXIT
    for _ in $(seq 1 100); do CAIRN_SOCKET=$state/cairnd.sock "$build/cairn" pool list >/dev/null 2>&1 && break; sleep 0.1; done
    CAIRN_SOCKET=$state/cairnd.sock "$build/cairn" pool create bench "$state/pool.img"
    CAIRN_SOCKET=$state/cairnd.sock "$build/cairn" create -o sharenfs=no_root_squash bench/m
}

# stop_cairnd: stops it; ZIL_LINE = the intent log's counters it logged on close.
stop_cairnd() {
    local state=$BENCH_DIR/cairn
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    trap - EXIT
    ZIL_LINE=$(grep -h "closing the intent log" "$state/cairnd.log" | tail -n 1 || true)
    rm -rf "$state"
}

run_cairn() {
    local build=$1 name=$2 n mode
    if [ -n "$VERS" ]; then
        start_cairnd "$build"
        for v in $VERS; do
            meta "$name" "$pid" "nfs://127.0.0.1/bench/m?nfsport=$P&mountport=$((P + 1))&version=$v" "$v"
        done
        stop_cairnd
    fi
    for n in $CLIENTS; do
        for mode in $CONC_MODES; do
            start_cairnd "$build"
            conc_one "$name" "$pid" "nfs://127.0.0.1/bench/m?nfsport=$P&mountport=$((P + 1))&version=3" "$n" "$mode"
            stop_cairnd
            # "... N log writes, N flushes asked, N flushes, N records, ...": flushes issued
            echo "$ZIL_LINE" | sed -n 's/.* \([0-9]*\) flushes, \([0-9]*\) records.*/\1 \2/p' |
                awk -v n="$name" -v c="$n" -v m="$mode" '$2 > 0 {printf "%s %s %s flushes_per_change %.3f\n", n, c, m, $1 / $2}' >>"$CRES"
        done
    done
}

if [ "${1:-}" = --ganesha-inner ]; then
    for v in $VERS; do
        if [ "$v" = 3 ]; then meta "$2" "$PEER_GANESHA_PID" "$PEER_NFS3_URL?$PEER_NFS3_ARGS" 3
        else meta "$2" "$PEER_GANESHA_PID" "$PEER_NFS4_URL?$PEER_NFS4_ARGS" 4; fi
    done
    [ -z "$CLIENTS" ] || conc "$2" "$PEER_GANESHA_PID" "$PEER_NFS3_URL?$PEER_NFS3_ARGS"
    exit 0
fi

# run_ganesha NAME PEER_DIR: one nfs-meta-bench run against ganesha exporting PEER_DIR/export.
run_ganesha() {
    PEER_DIR=$2 PEER_REUSE_RPCBIND=1 bash "$PEERS/peer-ganesha.sh" -- \
        env BENCH_DIR="$BENCH_DIR" BENCH_FILES="$FILES" BENCH_SIZES="$SIZES" BENCH_VERS="$VERS" \
        BENCH_CLIENTS="$CLIENTS" BENCH_CONC_FILES="$CONC_FILES" BENCH_CONC_SHARED="${BENCH_CONC_SHARED:-0}" \
        bash "$0" --ganesha-inner "$1" >"$BENCH_DIR/$1.out" 2>&1 || echo "# $1 run $run failed: $(tail -n 3 "$BENCH_DIR/$1.out")"
}

# ganesha over a fresh ext4 mounted dirsync (see the top of this file).
run_ganesha_dirsync() {
    local dir=$BENCH_DIR/ganesha-dirsync img=$BENCH_DIR/dirsync.img
    mkdir -p "$dir/export"
    truncate -s 2G "$img"
    if ! mkfs.ext4 -q -F "$img" || ! mount -o loop,dirsync "$img" "$dir/export"; then
        echo "# ganesha-dirsync run $run skipped: cannot make or mount $img"
        rm -rf "$dir" "$img"
        return
    fi
    run_ganesha ganesha-dirsync "$dir"
    umount "$dir/export"
    rm -rf "$dir" "$img"
}

builds=("$@")
[ ${#builds[@]} -gt 0 ] || builds=("$SRC/build")
for i in "${!builds[@]}"; do builds[$i]=$(cd "${builds[$i]}" && pwd); done
mkdir -p "$BENCH_DIR"
gcc -O2 -Wall -o "$META" "$PEERS/nfs-meta-bench.c" -lnfs
[ -z "$CLIENTS" ] || gcc -O2 -Wall -o "$CONC" "$SRC/tools/bench/nfs-meta-conc.c" -lnfs -lpthread
: >"$RES"
: >"$CRES"

[ -z "$VERS" ] || echo "# nfs-meta-bench over NFSv$(echo $VERS | sed 's/ /, v/g'), $FILES files per phase, medians of $RUNS runs"
echo "# $(nproc) cores; load at the start $(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq 1 "$RUNS"); do
    for i in "${!builds[@]}"; do run_cairn "${builds[$i]}" "cairn$((i + 1))"; done
    if [ "${BENCH_GANESHA:-1}" = 1 ] && command -v ganesha.nfsd >/dev/null && command -v rpcbind >/dev/null; then
        run_ganesha ganesha "$BENCH_DIR/ganesha"
        rm -rf "$BENCH_DIR/ganesha"
        if [ "${BENCH_GANESHA_DIRSYNC:-1}" = 1 ] && command -v mkfs.ext4 >/dev/null; then
            run_ganesha_dirsync
        fi
    fi
done
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg); cairnN = build N: ${builds[*]}"
[ -s "$RES" ] && echo "| server | file size | create/s | stat/s | readdir entries/s | unlink/s | server CPU ms/file |"
[ -s "$RES" ] && echo "|---|---:|---:|---:|---:|---:|---:|"
awk '{print $1, $2}' "$RES" | sort -u | while read -r name size; do
    row="| $name | $size B"
    for key in create_ops_per_sec stat_ops_per_sec readdir_entries_per_sec unlink_ops_per_sec cpu_ms_per_file; do
        v=$(awk -v n="$name" -v s="$size" -v k="$key" '$1 == n && $2 == s && $3 == k {print $4}' "$RES" |
            sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}')
        row="$row | $v"
    done
    echo "$row |"
done
[ -n "$CLIENTS" ] || exit 0

# median KEY over the lines of $CRES for server $1, N $2, mode $3
cmedian() {
    awk -v n="$1" -v c="$2" -v m="$3" -v k="$4" '$1 == n && $2 == c && $3 == m && $4 == k {print $5}' "$CRES" |
        sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}'
}
echo
echo "# NFSv3 empty files by N clients at once, $CONC_FILES files in all per phase; medians of $RUNS runs"
echo "| server | clients | directories | create/s | unlink/s | server CPU us/create | us/unlink | log flushes per change |"
echo "|---|---:|---|---:|---:|---:|---:|---:|"
awk '{print $1, $2, $3}' "$CRES" | sort -u | sort -k2,2n -k3,3 -k1,1 | while read -r name n mode; do
    row="| $name | $n | $mode"
    for key in create_ops_per_sec unlink_ops_per_sec create_cpu_us_per_op unlink_cpu_us_per_op flushes_per_change; do
        row="$row | $(cmedian "$name" "$n" "$mode" "$key")"
    done
    echo "$row |"
done
# Ratios per run (each run's servers saw the same load), then their median.
echo
echo "# Cairn / peer per run, median of the runs; one ratio per build in the order given (cairn1 / cairn2 ...)"
echo "| clients | directories | phase | cairnN / ganesha | cairnN / ganesha-dirsync |"
echo "|---:|---|---|---|---|"
awk '{print $2, $3}' "$CRES" | sort -u | sort -k1,1n | while read -r n mode; do
    for key in create_ops_per_sec unlink_ops_per_sec; do
        g=; d=
        for i in "${!builds[@]}"; do
            for peer in ganesha ganesha-dirsync; do
                r=$(awk -v c="$n" -v m="$mode" -v k="$key" -v a="cairn$((i + 1))" -v b="$peer" '
                    $2 == c && $3 == m && $4 == k && $1 == a {x[++na] = $5}
                    $2 == c && $3 == m && $4 == k && $1 == b {y[++nb] = $5}
                    END {for (j = 1; j <= na && j <= nb; j++) if (y[j] > 0) printf "%.2f\n", x[j] / y[j]}' "$CRES" |
                    sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)] "x"; else print "-"}')
                if [ "$peer" = ganesha ]; then g="$g${g:+ / }$r"; else d="$d${d:+ / }$r"; fi
            done
        done
        echo "| $n | $mode | ${key%%_*} | $g | $d |"
    done
done
