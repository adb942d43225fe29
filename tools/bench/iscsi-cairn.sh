# Sourced by the iSCSI benchmarks (iscsi-perf.sh, iscsi-write-ab.sh): one Cairn
# target set up the same way for all of them.
#
# cairn_lun_start BUILD SCRATCH PORT SIZE ARC_MAX FILL_SECS [DIRTY_MAX]
#   starts BUILD's cairnd (state, socket and config in SCRATCH, iSCSI on
#   127.0.0.1:PORT, the NFS ports above it) on a pool "bench" of one 8 GiB file
#   in SCRATCH (dirty_max DIRTY_MAX when given), with a thick SIZE volume
#   bench/lun as LUN 0 of $CAIRN_BENCH_IQN, filled by FILL_SECS s of 128 KiB
#   writes so reads read data; exports CAIRN_SOCKET; prints the daemon's pid.
#   VOLBLOCKSIZE (environment): the volume's volblocksize, when set; CAIRND_CONF_EXTRA:
#   more cairnd.conf lines (e.g. "analytics = 0").
CAIRN_BENCH_IQN=iqn.2026-11.org.cairn.bench:lun

cairn_lun_start() {
    local b=$1 s=$2 port=$3 size=$4 arc=$5 fill=$6 dirty=${7:-}
    export CAIRN_SOCKET="$s/cairnd.sock"
    truncate -s 8G "$s/disk"
    printf 'arc_max = %s\n%s\n' "$arc" "${CAIRND_CONF_EXTRA:-}" >"$s/cairnd.conf"
    "$b/cairnd" --config "$s/cairnd.conf" --state-dir "$s/state" --socket "$CAIRN_SOCKET" \
        --nfs-listen 127.0.0.1:$((port + 10)) --mount-listen 127.0.0.1:$((port + 11)) \
        --portmap-listen 127.0.0.1:$((port + 12)) --iscsi-listen 127.0.0.1:$port
    "$b/cairn" pool create bench "$s/disk" >/dev/null
    [ -z "$dirty" ] || "$b/cairn" pool set dirty_max="$dirty" bench
    "$b/cairn" create -V "$size" ${VOLBLOCKSIZE:+-o volblocksize=$VOLBLOCKSIZE} bench/lun
    "$b/cairn" iscsi target create $CAIRN_BENCH_IQN >/dev/null
    "$b/cairn" iscsi lun add $CAIRN_BENCH_IQN bench/lun >/dev/null
    "$b/iscsi_writeperf" 127.0.0.1:$port $CAIRN_BENCH_IQN 0 256 32 "$fill" >/dev/null
    cat "$s/state/cairnd.pid"
}
