#!/usr/bin/env bash
# NFSv3 locking (NLM v1/v3/v4 and NSM) with a raw RPC client: conflicts between two
# owners, ranges, shares, NLM over UDP beside TCP, v3 against v4 locks on one file;
# blocked locks granted by a
# callback to the client host's lock manager (the test stands in for the client
# host's portmapper on a port of its own: nlm_client_portmap_port); and after
# SIGKILL, SM_NOTIFY to the client and a grace period in which only reclaims pass.
# NFS and MOUNT listen on every address; the lock that must be reclaimed is taken
# through 127.0.0.2 (a service address), so SM_NOTIFY must name 127.0.0.2, not the
# host name, and come from 127.0.0.2, or a client's statd would ignore it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"
NLMRPC="python3 $CAIRN_SRC/tests/integration/nlm_rpc.py"

nlm_rpc() {
    if ! $NLMRPC 127.0.0.1 "$NFS_PORT" "$MOUNT_PORT" "$PMAP_PORT" /tank/share "$@" \
        >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "nlm_rpc.py $*: $(cat "$LAST_STDERR")"
    fi
}

CBPORT=$(cairn_random_port)
printf 'nfs_grace_time = 15\nnlm_client_portmap_port = %s\n' "$CBPORT" >"$T/nlm.conf"
SVC=127.0.0.2
# start_d1: the daemon, with NFS and MOUNT on every address (fresh ports each time).
start_d1() {
    local p
    p=$(cairn_random_port)
    nfs_daemon_start d1 --config "$T/nlm.conf" --nfs-listen "0.0.0.0:$p" \
        --mount-listen "0.0.0.0:$((p + 1))"
}
sparse_files "$T/dev" 2G a
start_d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
URL=$(nfs_url /tank/share)
nfs_client "$URL" put locked.dat "lock me"

nlm_rpc locks locked.dat
pass "NLM: TEST/LOCK/UNLOCK, ranges, v1/v3/v4, SHARE, FREE_ALL; v3 and v4 locks conflict"
nlm_rpc blocking locked.dat "$CBPORT"
pass "NLM: blocked locks granted by NLM_GRANTED callbacks; CANCEL; TEST_MSG -> TEST_RES"

$NLMRPC "$SVC" "$NFS_PORT" "$MOUNT_PORT" "$PMAP_PORT" /tank/share hold locked.dat \
    >"$LAST_STDOUT" 2>"$LAST_STDERR" || fail "NLM lock through $SVC: $(cat "$LAST_STDERR")"
OLDSTATE=$(cat "$LAST_STDOUT")
grep -q " $SVC tank\$" "$T/d1/nfs/nlm-hosts" ||
    fail "the monitored host's server address is not recorded: $(cat "$T/d1/nfs/nlm-hosts")"
daemon_kill9
$NLMRPC "$SVC" 0 0 0 /tank/share reclaim locked.dat "$CBPORT" "$T/ports" "$OLDSTATE" \
    >"$T/reclaim.out" 2>"$T/reclaim.err" &
RPID=$!
for i in $(seq 1 100); do [ -e "$T/ports.ready" ] && break; sleep 0.1; done
start_d1
echo "$NFS_PORT $MOUNT_PORT $PMAP_PORT" >"$T/ports"
wait "$RPID" || fail "reclaim after SIGKILL: $(cat "$T/reclaim.err")"
pass "after SIGKILL: SM_NOTIFY for $SVC from $SVC with a new odd state, grace, the lock reclaimed"

# A clean stop unexports everything, which releases the locks: the host must stay
# monitored all the same.
$NLMRPC "$SVC" "$NFS_PORT" "$MOUNT_PORT" "$PMAP_PORT" /tank/share hold locked.dat \
    >"$LAST_STDOUT" 2>"$LAST_STDERR" || fail "NLM lock through $SVC: $(cat "$LAST_STDERR")"
OLDSTATE=$(cat "$LAST_STDOUT")
daemon_stop
rm -f "$T/ports" "$T/ports.ready"
$NLMRPC "$SVC" 0 0 0 /tank/share reclaim locked.dat "$CBPORT" "$T/ports" "$OLDSTATE" \
    >"$T/reclaim.out" 2>"$T/reclaim.err" &
RPID=$!
for i in $(seq 1 100); do [ -e "$T/ports.ready" ] && break; sleep 0.1; done
start_d1
echo "$NFS_PORT $MOUNT_PORT $PMAP_PORT" >"$T/ports"
wait "$RPID" || fail "reclaim after a clean stop: $(cat "$T/reclaim.err")"
pass "after a clean stop: SM_NOTIFY, grace, the lock reclaimed"
