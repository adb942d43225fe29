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

# An entry whose service address is not on this head (IPaddr2 has not brought it up, or
# it belongs to a pool served elsewhere), or whose pool is not served here, is not
# notified from another address, which a statd would ignore: it waits for them until
# grace ends, then the log says who was not told.
daemon_stop
printf 'client-y 127.0.0.1 192.0.2.1 tank\nclient-z 127.0.0.1 %s elsewhere\n' "$SVC" \
    >>"$T/d1/nfs/nlm-hosts"
start_d1
LOG="$T/d1.daemon.log"
for i in $(seq 1 600); do
    grep -q 'client-y (127.0.0.1) was not told .*: 192.0.2.1 is not an address of this head' "$LOG" &&
        grep -q 'client-z (127.0.0.1) was not told .*: pool elsewhere is not served here' "$LOG" &&
        break
    sleep 0.1
done
grep -q 'client-y (127.0.0.1) was not told .*: 192.0.2.1 is not an address of this head' "$LOG" ||
    fail "no word on client-y, whose service address is not here: $(grep -a client-y "$LOG")"
grep -q 'client-z (127.0.0.1) was not told .*: pool elsewhere is not served here' "$LOG" ||
    fail "no word on client-z, whose pool is not here: $(grep -a client-z "$LOG")"
! grep -q 'told client-[yz]' "$LOG" || fail "an entry was notified from another address"
pass "entries whose service address or pool is not here are not notified from elsewhere"
