#!/usr/bin/env bash
# ALUA across a pair of heads (docs/ha.md "ALUA"): heads a (target port group 1,
# partner 2) and b (group 2, partner 1), both running on the same pool files, with
# an initiator logged in to each head's portal for the whole test (iscsi_client
# steps: one session, one command at a time). Pool tank with LUN 0 moves a -> b ->
# a by export and import, as a planned Pacemaker move does it. Each time:
#   - the head that lost the pool keeps the LU standby: REPORT TARGET PORT GROUPS
#     says its own group standby and the partner's active/optimized (preferred),
#     INQUIRY answers with the LU's serial, and TEST UNIT READY, READ and WRITE get
#     NOT READY, LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE
#     (02h 04h/0Bh), never LOGICAL UNIT NOT SUPPORTED;
#   - the head that gained it serves it active/optimized, and a session that saw
#     it standby is told ASYMMETRIC ACCESS STATE CHANGED (06h 2Ah/06h) once, then
#     reads and writes;
#   - a new login sees the same states (iscsi_client ids), so either head answers
#     for both groups.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CLIENT="$CAIRN_BIN/iscsi_client"
TGT=iqn.2026-12.org.cairn.test:alua
PA=127.0.0.1:$(cairn_random_port)
PB=127.0.0.1:$(cairn_random_port)

sparse_files "$T/dev" 1G d0
for head in a:1:2 b:2:1; do
    IFS=: read -r name group partner <<<"$head"
    printf 'alua_tpg_id = %s\nalua_partner_tpg_id = %s\n' "$group" "$partner" >"$T/$name.conf"
done
daemon_start b --config "$T/b.conf" --iscsi-listen "$PB"
SOCK_B=$CAIRN_SOCKET
daemon_start a --config "$T/a.conf" --iscsi-listen "$PA"
SOCK_A=$CAIRN_SOCKET
on() { local s; [ "$1" = a ] && s=$SOCK_A || s=$SOCK_B; shift; CAIRN_SOCKET=$s run_ok "$CAIRN" "$@"; }

on a pool create tank "$T/dev/d0"
on a create -s -V 64M tank/vol
on a iscsi target create "$TGT"
on a iscsi lun add --lun 0 "$TGT" tank/vol
# b knows the target (it comes with the pool) once it has imported tank once.
on a pool export tank
on b pool import -d "$T/dev" tank
on b pool export tank
on a pool import -d "$T/dev" tank

# A session per head, kept open: step S CMD sends one command to session S (SA at
# a, SB at b), the answer is in $OUT. Each talks through two fifos.
declare -A TO FROM
session() { # session NAME PORTAL
    mkfifo "$T/$1.in" "$T/$1.out"
    "$CLIENT" steps "$2" "$TGT" <"$T/$1.in" >"$T/$1.out" 2>"$T/$1.err" &
    CLIENT_PIDS+=("$!")
    local to from
    exec {to}>"$T/$1.in" {from}<"$T/$1.out"
    TO[$1]=$to FROM[$1]=$from
}
CLIENT_PIDS=()
# The sessions go with the test, also when it fails halfway.
trap 'rc=$?; kill "${CLIENT_PIDS[@]}" 2>/dev/null || true; (exit "$rc"); cairn_test_cleanup' EXIT
session SA "$PA"
session SB "$PB"
step() {
    echo "$2" >&"${TO[$1]}"
    OUT=""
    local line
    while IFS= read -r -t 20 line <&"${FROM[$1]}"; do
        [ "$line" = end ] && break
        OUT+="$line"$'\n'
        [ "$2" = rtpg ] || break
    done
    [ -n "$OUT" ] || fail "no answer to $2 on $1: $(cat "$T"/S?.err)"
    OUT=${OUT%$'\n'}
}
expect() { # expect S CMD ANSWER
    step "$1" "$2"
    [ "$OUT" = "$3" ] || fail "$2 through $1: '$OUT', want '$3'"
}
# The group lines REPORT TARGET PORT GROUPS gives through S when group ACTIVE serves.
expect_groups() {
    local want
    if [ "$2" = 1 ]; then
        want=$'group=1 state=0 pref=1 port=1\ngroup=2 state=2 pref=0 port=2'
    else
        want=$'group=2 state=0 pref=1 port=2\ngroup=1 state=2 pref=0 port=1'
    fi
    step "$1" rtpg
    [ "$(sort <<<"$OUT")" = "$(sort <<<"$want")" ] ||
        fail "REPORT TARGET PORT GROUPS through $1: '$OUT', want group $2 active/optimized"
}
# settle S: TEST UNIT READY past a new nexus's POWER ON; the answer after it in $OUT.
settle() {
    local i
    for i in 1 2 3; do
        step "$1" tur
        [ "$OUT" = "sense 6 29 00" ] || return 0
    done
}
STANDBY="sense 2 04 0b"
CHANGED="sense 6 2a 06"

# ---- tank on a: a's session reads and writes; b's port answers standby
settle SA
[ "$OUT" = good ] || fail "TEST UNIT READY through a: $OUT"
expect SA read good
expect SA write good
expect_groups SA 1
step SA inquiry
[ "$OUT" = good ] || fail "INQUIRY on a: $OUT"
settle SB
[ "$OUT" = "$STANDBY" ] || fail "TEST UNIT READY through b: '$OUT', want '$STANDBY'"
expect SB read "$STANDBY"
expect SB write "$STANDBY"
expect SB inquiry good
expect_groups SB 1
pass "tank on a: a active/optimized; b's port says standby (02h 04h/0Bh to media access), INQUIRY and RTPG answer"

move() { # move FROM TO
    on "$1" pool export tank
    on "$2" pool import -d "$T/dev" tank
}
# ---- planned move to b
move a b
expect SA tur "$CHANGED"
expect SA tur "$STANDBY"
expect SA read "$STANDBY"
expect SA write "$STANDBY"
expect SA inquiry good
expect_groups SA 2
expect SB read "$CHANGED"
expect SB read good
expect SB write good
expect_groups SB 2
pass "moved to b: a's session told once (06h 2Ah/06h), then standby; b's told once, then reads and writes"

"$CLIENT" ids "$PA" "$TGT" >"$T/ids.a" 2>"$LAST_STDERR" || fail "ids at a: $(cat "$LAST_STDERR")"
"$CLIENT" ids "$PB" "$TGT" >"$T/ids.b" 2>"$LAST_STDERR" || fail "ids at b: $(cat "$LAST_STDERR")"
[ "$(grep '^serial=' "$T/ids.a")" = "$(grep '^serial=' "$T/ids.b")" ] ||
    fail "the standby LU's serial on a differs from b's: $(cat "$T/ids.a" "$T/ids.b")"
grep -qx 'group=2 state=0 pref=1 port=2' "$T/ids.a" && grep -qx 'group=1 state=2 pref=0 port=1' "$T/ids.a" ||
    fail "a new login at a: $(cat "$T/ids.a")"
grep -qx 'group=2 state=0 pref=1 port=2' "$T/ids.b" && grep -qx 'group=1 state=2 pref=0 port=1' "$T/ids.b" ||
    fail "a new login at b: $(cat "$T/ids.b")"
pass "new logins at either head: the same LU, group 2 active/optimized, group 1 standby"

# ---- and back to a
move b a
expect SA write "$CHANGED"
expect SA write good
expect SA read good
expect_groups SA 1
expect SB tur "$CHANGED"
expect SB read "$STANDBY"
expect_groups SB 1
pass "moved back to a: the states swap again, each session told once"

exec {TO[SA]}>&- {TO[SB]}>&-   # the sessions log out at the end of their input
wait "${CLIENT_PIDS[@]}" || fail "a session ended badly: $(cat "$T"/S?.err)"
