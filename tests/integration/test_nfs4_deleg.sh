#!/usr/bin/env bash
# NFSv4 delegations over the wire (tests/integration/nfs4_deleg_rpc.py: raw clients
# that answer callbacks), on a daemon with a 5 s lease:
#   - a read delegation is recalled (CB_SEQUENCE + CB_RECALL on the 4.1 client's own
#     connection) by another client's OPEN for write, which waits with DELAY until
#     DELEGRETURN;
#   - a write delegation is recalled by another client's OPEN for read; its holder
#     opens under it (CLAIM_DELEG_CUR_FH) before returning it, and its data is there;
#   - a client that ignores the recall loses the delegation a lease later (SEQUENCE
#     flags it, the stateid answers DELEG_REVOKED until FREE_STATEID);
#   - a recall left unanswered takes the back channel down (SEQUENCE says so) and comes
#     again once the client binds a connection to it;
#   - an NFSv3 WRITE is JUKEBOX and an NLM LOCK DENIED_GRACE_PERIOD while they recall
#     the delegation;
#   - a 4.0 client's callback address is probed with CB_NULL and receives CB_RECALL;
#   - another client's GETATTR of size and change under a write delegation asks the
#     holder (CB_GETATTR, 4.1 back channel and 4.0 callback address) and answers with
#     its values; VERIFY and NVERIFY compare with the holder's values;
#   - after a restart a client reclaims the read and write delegations it held
#     (CLAIM_PREVIOUS with their type) and they are recalled like any other;
#   - with nfs_delegations = 0 no delegation is granted.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

DELEGRPC="python3 $CAIRN_SRC/tests/integration/nfs4_deleg_rpc.py"
deleg_rpc() {
    local exp=$1; shift
    if ! $DELEGRPC 127.0.0.1 "$NFS_PORT" "$exp" "$@" >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "nfs4_deleg_rpc.py $exp $*: $(cat "$LAST_STDERR")"
    fi
}

sparse_files "$T/dev" 4G a
printf 'nfs_lease_time = 5\nnfs_delegations = 1\n' >"$T/lease.conf"
nfs_daemon_start d1 --config "$T/lease.conf"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
expect_share /tank/share

deleg_rpc /tank/share "rc-$$" recall f-recall
pass "a read delegation is recalled on a conflicting OPEN, which succeeds after DELEGRETURN"

deleg_rpc /tank/share "wr-$$" write f-write
pass "a write delegation is recalled by another client's OPEN for read; CLAIM_DELEG_CUR_FH works"

deleg_rpc /tank/share "rv-$$" revoke f-revoke 5
pass "an unreturned delegation is revoked a lease after its recall (DELEG_REVOKED, flags)"

deleg_rpc /tank/share "rb-$$" rebind f-rebind
pass "an unanswered recall takes the back channel down; rebinding brings the recall again"

deleg_rpc /tank/share "v3-$$" v3 f-v3
pass "an NFSv3 WRITE is JUKEBOX while the delegation is recalled, then succeeds"

deleg_rpc /tank/share "nlm-$$" nlm f-nlm
pass "an NLM LOCK is DENIED_GRACE_PERIOD while the delegation is recalled, then granted"

deleg_rpc /tank/share "v40-$$" v40 f-v40
pass "the 4.0 callback path: CB_NULL probe, read delegation, CB_RECALL on a new connection"

deleg_rpc /tank/share "cg-$$" cbgetattr f-cbgetattr
pass "GETATTR, VERIFY, NVERIFY under another client's write delegation: CB_GETATTR, the holder's size and change"

deleg_rpc /tank/share "cgx-$$" cbgetattrexpired f-cbgetattrexpired 5
pass "a write delegation's holder whose lease ran out is not asked: its state yields to the GETATTR"

deleg_rpc /tank/share "cg40-$$" cbgetattr40 f-cbgetattr40
pass "CB_GETATTR to a 4.0 holder of a write delegation on its callback address"

deleg_rpc /tank/share "rcl-$$" deleghold f-rcl
HELD_FHS=$(cat "$LAST_STDOUT")
deleg_rpc /tank/share "rcl40-$$" deleghold40 f-rcl40
HELD40_FH=$(cat "$LAST_STDOUT")
daemon_stop
printf 'nfs_lease_time = 5\nnfs_grace_time = 10\nnfs_delegations = 1\n' >"$T/grace.conf"
nfs_daemon_start d1 --config "$T/grace.conf"
expect_share /tank/share
# Both reclaim in the same grace period, then wait for its end.
$DELEGRPC 127.0.0.1 "$NFS_PORT" /tank/share "rcl40-$$" delegreclaim40 "$HELD40_FH" f-rcl40 \
    >"$T/rcl40.out" 2>&1 &
RCL40=$!
# shellcheck disable=SC2086 # two handles
deleg_rpc /tank/share "rcl-$$" delegreclaim $HELD_FHS f-rcl
pass "after a restart a client reclaims its read and write delegations (CLAIM_PREVIOUS), which are recalled as usual"
wait "$RCL40" || fail "nfs4_deleg_rpc.py delegreclaim40: $(cat "$T/rcl40.out")"
pass "a 4.0 client reclaims its read delegation after a restart; recalled on conflict, or given back at once when told to ($(cat "$T/rcl40.out"))"

daemon_stop
printf "nfs_lease_time = 5\nnfs_grace_time = 1\nnfs_delegations = 0\n" >"$T/nodeleg.conf"
nfs_daemon_start d1 --config "$T/nodeleg.conf"
expect_share /tank/share
deleg_rpc /tank/share "no-$$" none f-none
pass "with nfs_delegations = 0 none are granted"
daemon_stop
