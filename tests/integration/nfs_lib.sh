# Helpers for the NFS integration tests (source after lib.sh).

NFSCLIENT="$CAIRN_BIN/nfs_client"
NFSRPC="python3 $CAIRN_SRC/tests/integration/nfs_rpc.py"

# nfs_daemon_start NAME [args]: daemon_start (which retries ports already taken), then
# NFS_PORT, MOUNT_PORT and PMAP_PORT as the daemon reports them.
nfs_daemon_start() {
    daemon_start "$@"
    nfs_ports "$1"
}

# nfs_ports NAME: sets NFS_PORT, MOUNT_PORT, PMAP_PORT from daemon NAME's log (the
# last start), as the NFS server reports them.
nfs_ports() {
    local line
    line=$(grep -a 'NFS server: nfs port' "$T/$1.daemon.log" | tail -n 1)
    [ -n "$line" ] || fail "daemon $1 did not start the NFS server: $(tail -n 5 "$T/$1.daemon.log")"
    NFS_PORT=$(sed -E 's/.*nfs port ([0-9]+).*/\1/' <<<"$line")
    MOUNT_PORT=$(sed -E 's/.*mount port ([0-9]+).*/\1/' <<<"$line")
    PMAP_PORT=$(sed -E 's/.*portmap port ([0-9]+).*/\1/' <<<"$line")
}

# nfs_url PATH: a libnfs URL for the export at PATH (NFSv3).
nfs_url() { echo "nfs://127.0.0.1$1?nfsport=$NFS_PORT&mountport=$MOUNT_PORT&version=3"; }

# nfs_rpc EXPORT MODE ARGS...: the raw RPC prober; output in $LAST_STDOUT.
nfs_rpc() {
    local exp=$1; shift
    if ! $NFSRPC 127.0.0.1 "$NFS_PORT" "$MOUNT_PORT" "$PMAP_PORT" "$exp" "$@" \
        >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "nfs_rpc.py $exp $*: $(cat "$LAST_STDERR")"
    fi
}

# nfs4_rpc EXPORT OWNER MODE ARGS...: the raw NFSv4.1 client as client OWNER; output
# in $LAST_STDOUT.
NFS4RPC="python3 $CAIRN_SRC/tests/integration/nfs4_rpc.py"
nfs4_rpc() {
    local exp=$1; shift
    if ! $NFS4RPC 127.0.0.1 "$NFS_PORT" "$exp" "$@" >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "nfs4_rpc.py $exp $*: $(cat "$LAST_STDERR")"
    fi
}

# nfs_client URL MODE ARGS...: the libnfs client; output in $LAST_STDOUT.
nfs_client() {
    if ! "$NFSCLIENT" "$@" >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "nfs_client $*: $(cat "$LAST_STDERR")"
    fi
}

# wait_export PATH: until `cairn share list` shows PATH (exports follow changes at once;
# this only guards against a slow machine).
expect_share() {
    run_ok "$CAIRN" share list -H
    grep -q "	$1	" "$LAST_STDOUT" || fail "share list lacks $1: $(cat "$LAST_STDOUT")"
}
expect_no_share() {
    run_ok "$CAIRN" share list -H
    if grep -q "	$1	" "$LAST_STDOUT"; then fail "share list still shows $1: $(cat "$LAST_STDOUT")"; fi
}
