#!/usr/bin/env bash
# Identity that moves with the pool (docs/ha.md "What moves with a pool"): two cairnd
# heads with their own state dirs, sockets, ports and ALUA groups (a: 1, b: 2) on the
# same pool files. Head a serves an NFS share and a LUN with CHAP and an access list;
# an NFSv4.1 client holds a file open, two nexuses of the allowed initiator register
# persistent reservations (without APTPL) and one reserves Exclusive Access. a is
# killed with SIGKILL; b imports the pool with -f, and:
#   - a v3 file handle from a works on b (no STALE), and b's write verifier differs
#     from a's (a client re-sends what it had not committed);
#   - the v4 client reclaims its open (CLAIM_PREVIOUS) in b's grace period, while a
#     new client's OPEN gets GRACE; a v4 client that only connected to a and never
#     opened anything was not recorded in the pool, and b refuses its reclaim
#     (NO_GRACE);
#   - the host that held an NLM lock on a gets SM_NOTIFY from b with a state number
#     above a's, naming the server by the pool's cairn:nfs_notify_name (set on a,
#     read by b from the pool) and sent from the address the lock was taken through,
#     and reclaims its lock in b's grace period (nlm_rpc.py reclaim);
#   - VPD 0x80/0x83 name the same LU (serial, NAA); b's port and group are its own
#     (relative port 2, group 2), and REPORT TARGET PORT GROUPS says group 2
#     active/optimized and group 1 standby where a said the opposite;
#   - CHAP and the access list refuse and admit whom they did on a;
#   - the registrations and the reservation are there: the holder writes, the other
#     registrant gets RESERVATION CONFLICT.
# Then b restarts on its own (a power loss for its LUs): reservations made without
# APTPL are gone, as SPC-4 wants.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

CLIENT="$CAIRN_BIN/iscsi_client"
TGT=iqn.2026-11.org.cairn.test:ha
ME=iqn.2026-11.org.cairn.test:esx1
CH=(--chap alice alicesecret123)
IA=(--initiator "$ME" --isid 1 "${CH[@]}")
IB=(--initiator "$ME" --isid 2 "${CH[@]}")
PA=127.0.0.1:$(cairn_random_port)
PB=127.0.0.1:$(cairn_random_port)
CBPORT=$(cairn_random_port)
NLMRPC="python3 $CAIRN_SRC/tests/integration/nlm_rpc.py"

# pr PORTAL WHO LUN OP...: one reservation step; stdout in $LAST_STDOUT, status returned.
pr() {
    local portal=$1 rc=0
    local -n who=$2
    "$CLIENT" "${who[@]}" pr "$portal" "$TGT" "$3" "${@:4}" >"$LAST_STDOUT" 2>"$LAST_STDERR" || rc=$?
    return "$rc"
}
pr_ok() { pr "$@" || fail "pr $*: exit $? $(cat "$LAST_STDERR")"; }
expect_status() {
    local want=$1 rc=0
    shift
    pr "$@" || rc=$?
    [ "$rc" -eq "$want" ] || fail "pr $*: exit $rc, want $want $(cat "$LAST_STDERR")"
}
keys() { pr_ok "$1" "$2" 0 keys; sort "$LAST_STDOUT" | tr '\n' ' '; }
# ids PORTAL: LUN 0's identity lines (iscsi_client ids) in $LAST_STDOUT.
ids() { "$CLIENT" "${IA[@]}" ids "$1" "$TGT" >"$LAST_STDOUT" 2>"$LAST_STDERR" ||
            fail "ids at $1: $(cat "$LAST_STDERR")"; }
id_line() { grep "^$1=" "$LAST_STDOUT" | head -n 1; }
# login_status PORTAL ARGS...: iscsi_client login's exit status (2: refused).
login_status() {
    local portal=$1 rc=0
    shift
    "$CLIENT" "$@" login "$portal" "$TGT" >/dev/null 2>&1 || rc=$?
    echo "$rc"
}
check_access() {
    [ "$(login_status "$1" "${IA[@]}")" = 0 ] || fail "the allowed initiator with its secret is refused at $1"
    [ "$(login_status "$1" --initiator "$ME" --chap alice wrongsecret123)" = 2 ] ||
        fail "a wrong CHAP secret is admitted at $1"
    [ "$(login_status "$1" --initiator iqn.2026-11.org.cairn.test:intruder "${CH[@]}")" = 2 ] ||
        fail "an initiator outside the access list is admitted at $1"
}

sparse_files "$T/dev" 2G a
for head in a:1:2 b:2:1; do
    IFS=: read -r name group partner <<<"$head"
    printf 'alua_tpg_id = %s\nalua_partner_tpg_id = %s\nnfs_grace_time = 20\nnlm_client_portmap_port = %s\n' \
        "$group" "$partner" "$CBPORT" >"$T/$name.conf"
done

# ---- head a
nfs_daemon_start a --config "$T/a.conf" --iscsi-listen "$PA"
A_PID=$DAEMON_PID
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
run_ok "$CAIRN" set cairn:nfs_notify_name=tank-nfs.example tank
expect_share /tank/share
nfs4_rpc /tank/share "ha-$$" hold held
FH4=$(tail -n 1 "$LAST_STDOUT")
nfs4_rpc /tank/share "ha-idle-$$" idle
nfs_rpc /tank/share savefh held
FH3=$(cat "$LAST_STDOUT")
nfs_rpc /tank/share verifier
VERF_A=$(cat "$LAST_STDOUT")
nfs_client "$(nfs_url /tank/share)" put locked.dat "lock me"
$NLMRPC 127.0.0.1 "$NFS_PORT" "$MOUNT_PORT" "$PMAP_PORT" /tank/share hold locked.dat \
    >"$LAST_STDOUT" 2>"$LAST_STDERR" || fail "NLM lock on a: $(cat "$LAST_STDERR")"
NSM_A=$(cat "$LAST_STDOUT")

run_ok "$CAIRN" create -s -V 64M tank/vol
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add --lun 0 "$TGT" tank/vol
run_ok "$CAIRN" iscsi acl add "$TGT" "$ME"
run_ok "$CAIRN" iscsi chap set "$TGT" alice alicesecret123
check_access "$PA"
ids "$PA"
SERIAL=$(id_line serial)
NAA=$(id_line naa)
[ -n "$SERIAL" ] && [ -n "$NAA" ] || fail "no serial or NAA on a: $(cat "$LAST_STDOUT")"
[ "$(id_line relport)" = relport=1 ] && [ "$(id_line tpg)" = tpg=1 ] ||
    fail "a's VPD 0x83 port/group: $(cat "$LAST_STDOUT")"
grep -qx 'group=1 state=0 pref=1 port=1' "$LAST_STDOUT" &&
    grep -qx 'group=2 state=2 pref=0 port=2' "$LAST_STDOUT" ||
    fail "a's REPORT TARGET PORT GROUPS: $(cat "$LAST_STDOUT")"
pass "a: LU $NAA in group 1 (active/optimized), partner group 2 standby"

pr_ok "$PA" IA 0 register a1
pr_ok "$PA" IB 0 register b2
pr_ok "$PA" IA 0 reserve a1 3
expect_status 3 "$PA" IB 0 write
[ "$(keys "$PA" IA)" = "a1 b2 " ] || fail "keys on a: $(keys "$PA" IA)"

# ---- a dies; b takes the pool over
$NLMRPC 127.0.0.1 0 0 0 /tank/share reclaim locked.dat "$CBPORT" "$T/ports" "$NSM_A" \
    tank-nfs.example 127.0.0.1 >"$T/nlm.out" 2>"$T/nlm.err" &
NLM_PID=$!
for i in $(seq 1 100); do [ -e "$T/ports.ready" ] && break; sleep 0.1; done
daemon_kill9 "$A_PID"
nfs_daemon_start b --config "$T/b.conf" --iscsi-listen "$PB"
run_ok "$CAIRN" pool import -d "$T/dev" -f tank
expect_share /tank/share
echo "$NFS_PORT $MOUNT_PORT $PMAP_PORT" >"$T/ports"

nfs_rpc /tank/share usefh "$FH3" 0
nfs_rpc /tank/share verifier
[ "$(cat "$LAST_STDOUT")" != "$VERF_A" ] || fail "b's write verifier is a's ($VERF_A)"
pass "a's v3 file handle works on b; b's write verifier is not a's"
# While b is surely in grace (the recorded client has not said RECLAIM_COMPLETE).
nfs4_rpc /tank/share "ha-idle-$$" no-reclaim "$FH4"
pass "a's v4 client that never opened anything may not reclaim on b"
nfs4_rpc /tank/share "ha-$$" reclaim "$FH4"
pass "a's v4 client reclaims its open in b's grace period; a new client waits"

check_access "$PB"
ids "$PB"
[ "$(id_line serial)" = "$SERIAL" ] || fail "VPD 0x80 on b: $(id_line serial), a said $SERIAL"
[ "$(id_line naa)" = "$NAA" ] || fail "VPD 0x83 NAA on b: $(id_line naa), a said $NAA"
[ "$(id_line relport)" = relport=2 ] && [ "$(id_line tpg)" = tpg=2 ] ||
    fail "b's VPD 0x83 port/group: $(cat "$LAST_STDOUT")"
grep -qx 'group=2 state=0 pref=1 port=2' "$LAST_STDOUT" &&
    grep -qx 'group=1 state=2 pref=0 port=1' "$LAST_STDOUT" ||
    fail "b's REPORT TARGET PORT GROUPS: $(cat "$LAST_STDOUT")"
pass "b: the same serial and NAA; group 2 active/optimized, group 1 standby; CHAP and ACL as on a"

[ "$(keys "$PB" IA)" = "a1 b2 " ] || fail "keys on b: '$(keys "$PB" IA)'"
pr_ok "$PB" IA 0 resv
[ "$(cat "$LAST_STDOUT")" = "a1 3" ] || fail "reservation on b: $(cat "$LAST_STDOUT")"
expect_status 0 "$PB" IA 0 write
expect_status 3 "$PB" IB 0 write
pass "registrations and the Exclusive Access reservation moved with the pool"
wait "$NLM_PID" || fail "NLM reclaim on b: $(cat "$T/nlm.err")"
pass "the NLM host of a got SM_NOTIFY from b for tank-nfs.example (state above $NSM_A) and reclaimed its lock in grace"

# ---- b restarts by itself: a power loss for its LUs
daemon_stop
daemon_start b --config "$T/b.conf" --iscsi-listen "$PB"
[ -z "$(keys "$PB" IA)" ] || fail "reservations without APTPL survived b's restart: $(keys "$PB" IA)"
expect_status 0 "$PB" IB 0 write
pass "a restart of the head still drops reservations made without APTPL"

daemon_stop
check_clean tank "$T/dev"
