#!/usr/bin/env bash
# Persistent reservations across a crash (SPC-4 APTPL), with libiscsi clients.
#
# LUN 0: two initiators register with APTPL=1 and one reserves Exclusive Access;
# cairnd is killed with SIGKILL right after the last acknowledgement and restarted:
# the keys, the reservation and PTPL_A are back, the holder may write and the
# registered non-holder and an unregistered initiator get RESERVATION CONFLICT.
# Then a registration with APTPL=0 turns persistence off: after the next SIGKILL
# the LUN comes back with no keys and no reservation. LUN 1 never had APTPL: its
# keys and reservation are gone after every restart. Removing a LUN and adding it
# again starts clean. Each initiator keeps a fixed ISID, so its I_T nexus is the
# same one across logins, as open-iscsi's and ESXi's are.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CLIENT="$CAIRN_BIN/iscsi_client"
TGT=iqn.2026-11.org.cairn.test:pr
P=127.0.0.1:$(cairn_random_port)
IA=(--initiator iqn.2026-11.org.cairn.test:node-a --isid 1)
IB=(--initiator iqn.2026-11.org.cairn.test:node-b --isid 2)
IC=(--initiator iqn.2026-11.org.cairn.test:node-c --isid 3)

# pr WHO LUN OP...: one step; stdout in $LAST_STDOUT, exit status returned.
pr() {
    local -n who=$1
    local rc=0
    "$CLIENT" "${who[@]}" pr "$P" "$TGT" "$2" "${@:3}" >"$LAST_STDOUT" 2>"$LAST_STDERR" || rc=$?
    return "$rc"
}
pr_ok() { pr "$@" || fail "pr $*: exit $? $(cat "$LAST_STDERR")"; }
# expect_status WANT WHO LUN OP...: 0 good, 3 reservation conflict
expect_status() {
    local want=$1 rc=0
    shift
    pr "$@" || rc=$?
    [ "$rc" -eq "$want" ] || fail "pr $*: exit $rc, want $want $(cat "$LAST_STDERR")"
}
keys() { pr_ok "$1" "$2" keys; sort "$LAST_STDOUT" | tr '\n' ' '; }
resv() { pr_ok "$1" "$2" resv; cat "$LAST_STDOUT"; }
caps() { pr_ok "$1" "$2" caps; cat "$LAST_STDOUT"; }

sparse_files "$T/dev" 1G a
daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -s -V 64M tank/v0
run_ok "$CAIRN" create -s -V 64M tank/v1
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add --lun 0 "$TGT" tank/v0
run_ok "$CAIRN" iscsi lun add --lun 1 "$TGT" tank/v1

[ "$(caps IA 0)" = "ptpl_c=1 ptpl_a=0" ] || fail "REPORT CAPABILITIES before APTPL: $(caps IA 0)"
pr_ok IA 0 register a1 aptpl
pr_ok IB 0 register b2 aptpl
pr_ok IA 0 reserve a1 3
[ "$(caps IB 0)" = "ptpl_c=1 ptpl_a=1" ] || fail "REPORT CAPABILITIES after APTPL: $(caps IB 0)"
pr_ok IA 1 register 1a1
pr_ok IA 1 reserve 1a1 3
expect_status 3 IC 1 write
pass "APTPL registrations accepted"

daemon_kill9
daemon_start d1 --iscsi-listen "$P"
[ "$(keys IC 0)" = "a1 b2 " ] || fail "keys after SIGKILL: '$(keys IC 0)'"
[ "$(resv IC 0)" = "a1 3" ] || fail "reservation after SIGKILL: '$(resv IC 0)'"
[ "$(caps IC 0)" = "ptpl_c=1 ptpl_a=1" ] || fail "PTPL_A after SIGKILL: $(caps IC 0)"
expect_status 0 IA 0 write
expect_status 3 IB 0 write
expect_status 3 IB 0 read
expect_status 3 IC 0 write
# the restored nexus is the registrant: it may change its key (REGISTER checks it)
pr_ok IA 0 register a3 aptpl
[ "$(resv IC 0)" = "a3 3" ] || fail "the holder's new key: '$(resv IC 0)'"
pass "keys, reservation and PTPL_A survive SIGKILL (APTPL=1)"
[ -z "$(keys IC 1)" ] || fail "LUN 1 (no APTPL) kept keys: '$(keys IC 1)'"
[ "$(resv IC 1)" = none ] || fail "LUN 1 (no APTPL) kept its reservation"
expect_status 0 IC 1 write
pass "without APTPL nothing survives a restart"

# A registration with APTPL=0 turns persistence off for the whole LU.
pr_ok IB 0 register b4
[ "$(caps IC 0)" = "ptpl_c=1 ptpl_a=0" ] || fail "PTPL_A after APTPL=0: $(caps IC 0)"
[ "$(keys IC 0)" = "a3 b4 " ] || fail "keys before the second SIGKILL: '$(keys IC 0)'"
daemon_kill9
daemon_start d1 --iscsi-listen "$P"
[ -z "$(keys IC 0)" ] || fail "keys after APTPL=0 and SIGKILL: '$(keys IC 0)'"
[ "$(resv IC 0)" = none ] || fail "reservation after APTPL=0 and SIGKILL: '$(resv IC 0)'"
expect_status 0 IC 0 write
pass "APTPL=0 in the last registration: gone after SIGKILL"

# A clean stop keeps APTPL state too; removing the LUN forgets it.
pr_ok IA 0 register a5 aptpl
pr_ok IA 0 reserve a5 1
daemon_stop
daemon_start d1 --iscsi-listen "$P"
[ "$(resv IC 0)" = "a5 1" ] || fail "reservation after a clean restart: '$(resv IC 0)'"
expect_status 0 IC 0 read
expect_status 3 IC 0 write
run_ok "$CAIRN" iscsi lun remove "$TGT" 0
run_ok "$CAIRN" iscsi lun add --lun 0 "$TGT" tank/v0
[ -z "$(keys IC 0)" ] || fail "a re-added LUN has old keys: '$(keys IC 0)'"
daemon_kill9
daemon_start d1 --iscsi-listen "$P"
[ -z "$(keys IC 0)" ] || fail "a re-added LUN got old keys back after restart: '$(keys IC 0)'"
expect_status 0 IC 0 write
pass "a clean restart keeps APTPL state; LUN removal forgets it"
