#!/usr/bin/env bash
# The iSCSI target end to end: `cairn iscsi` commands and their refusals, discovery
# and INQUIRY with libiscsi's tools, data written over several sessions (FUA and
# SYNCHRONIZE CACHE) and read back, access lists, CHAP and mutual CHAP, header
# digests; then kill -9 and restart: data, target, LUN, NAA id, ACL and CHAP are back
# (the configuration lives in the pool); export/import; destroy -f of a LUN's volume.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CLIENT="$CAIRN_BIN/iscsi_client"
TGT=iqn.2026-11.org.cairn.test:basic
ME=iqn.2026-11.org.cairn.test:client
PORT=$(cairn_random_port)
P=127.0.0.1:$PORT

sparse_files "$T/dev" 2G a
daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -s -V 64M tank/vol1
run_ok "$CAIRN" create -V 32M tank/vol2
run_ok "$CAIRN" create tank/fs

# ---- administration and its refusals (each: one line, nothing changed) ----
run_ok "$CAIRN" iscsi target create "$TGT"
run_fail "$CAIRN" iscsi target create "$TGT"
expect_stderr 'already exists'
run_fail "$CAIRN" iscsi target create Not.An.IQN
expect_stderr 'not an iSCSI name'
run_ok "$CAIRN" iscsi lun add "$TGT" tank/vol1
run_fail "$CAIRN" iscsi lun add "$TGT" tank/vol1
expect_stderr 'already LUN 0'
run_fail "$CAIRN" iscsi lun add "$TGT" tank/fs
expect_stderr 'not a volume'
run_fail "$CAIRN" iscsi lun add "$TGT" tank/nothere
run_fail "$CAIRN" iscsi lun add iqn.2026-11.org.cairn.test:none tank/vol2
expect_stderr 'no iSCSI target'
run_fail "$CAIRN" iscsi lun add "$TGT" tank/vol2 --lun 0
expect_stderr 'already has LUN 0'
run_fail "$CAIRN" iscsi lun add "$TGT" tank/vol2 --lun 20000
run_ok "$CAIRN" iscsi lun add "$TGT" tank/vol2 --lun 3
run_fail "$CAIRN" iscsi lun remove "$TGT" 7
run_fail "$CAIRN" iscsi acl remove "$TGT" "$ME"
run_fail "$CAIRN" iscsi chap set "$TGT" user short
expect_stderr 'at least 12'
run_fail "$CAIRN" iscsi target destroy "$TGT"
expect_stderr 'has 2 LUNs'
run_fail "$CAIRN" destroy tank/vol1
expect_stderr 'LUN 0 of iSCSI target'
run_fail "$CAIRN" rename tank/vol1 tank/vol9
run_ok "$CAIRN" iscsi list -H
[ "$(wc -l <"$LAST_STDOUT")" -eq 2 ] || fail "list: $(cat "$LAST_STDOUT")"
expect_stdout "^$TGT	0	tank/vol1	[0-9a-f]{16}	any	-	0$"
expect_stdout "^$TGT	3	tank/vol2	"
run_ok "$CAIRN" iscsi target list -H
[ "$(cat "$LAST_STDOUT")" = "$TGT	2	any	-	0" ] || fail "target list: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" iscsi chap set "$TGT" bob bobsecret12345
run_ok "$CAIRN" iscsi chap clear "$TGT"
run_ok "$CAIRN" iscsi target list -H
expect_stdout "	-	0$"
pass "administration and refusals"

# ---- discovery, INQUIRY, capacity ----
iscsi-ls -s "iscsi://$P" >"$T/ls" 2>&1 || fail "iscsi-ls: $(cat "$T/ls")"
grep -q "Target:$TGT Portal:$P,1" "$T/ls" || fail "discovery: $(cat "$T/ls")"
grep -q "Lun:3" "$T/ls" || fail "LUN 3 not reported: $(cat "$T/ls")"
iscsi-inq "iscsi://$P/$TGT/0" >"$T/inq" 2>&1 || fail "iscsi-inq: $(cat "$T/inq")"
grep -q "Vendor:CAIRN" "$T/inq" || fail "inquiry: $(cat "$T/inq")"
iscsi-readcapacity16 "iscsi://$P/$TGT/0" >"$T/cap" 2>&1 || fail "readcapacity16: $(cat "$T/cap")"
grep -q "Total size:67108864" "$T/cap" || fail "capacity: $(cat "$T/cap")"
pass "discovery and inquiry"

# ---- data over three sessions, FUA and SYNCHRONIZE CACHE; header digests ----
"$CLIENT" write "$P" "$TGT" 42 1024 3 || fail "write/verify over 3 sessions"
"$CLIENT" --digest verify "$P" "$TGT" 42 1024 || fail "verify with header digests"
NAA=$("$CLIENT" naa "$P" "$TGT") || fail "no NAA id"
[ -n "$NAA" ] || fail "empty NAA id"
pass "data over several sessions, digests"

# ---- access list ----
run_ok "$CAIRN" iscsi acl add "$TGT" iqn.2026-11.org.cairn.test:other
rc=0; "$CLIENT" login "$P" "$TGT" || rc=$?
[ "$rc" -eq 2 ] || fail "an initiator not on the ACL logged in (rc $rc)"
iscsi-ls -s "iscsi://$P" 2>&1 | grep -q "$TGT" && fail "discovery shows a target the ACL refuses"
run_ok "$CAIRN" iscsi acl add "$TGT" "$ME"
"$CLIENT" login "$P" "$TGT" || fail "an initiator on the ACL was refused"
pass "access list"

# ---- CHAP and mutual CHAP ----
run_ok "$CAIRN" iscsi chap set "$TGT" alice alicesecret123
rc=0; "$CLIENT" login "$P" "$TGT" || rc=$?
[ "$rc" -eq 2 ] || fail "login without CHAP credentials succeeded"
rc=0; "$CLIENT" --chap alice wrongsecret123 login "$P" "$TGT" || rc=$?
[ "$rc" -eq 2 ] || fail "login with a wrong CHAP secret succeeded"
"$CLIENT" --chap alice alicesecret123 login "$P" "$TGT" || fail "CHAP login refused"
run_ok "$CAIRN" iscsi chap set "$TGT" alice alicesecret123 --mutual cairn cairnsecret456
"$CLIENT" --chap alice alicesecret123 --mutual cairn cairnsecret456 login "$P" "$TGT" ||
    fail "mutual CHAP login refused"
rc=0; "$CLIENT" --chap alice alicesecret123 --mutual cairn notthesecret1 login "$P" "$TGT" || rc=$?
[ "$rc" -eq 2 ] || fail "the initiator accepted a target with the wrong mutual secret"
run_ok "$CAIRN" iscsi list
expect_stdout 'mutual'
grep -q secret "$LAST_STDOUT" && fail "a CHAP secret shows in iscsi list"
run_ok "$CAIRN" iscsi list --json
grep -q secret "$LAST_STDOUT" && fail "a CHAP secret shows in iscsi list --json"
pass "CHAP, mutual CHAP"

# ---- kill -9 and restart: data and configuration are back ----
daemon_kill9
daemon_start d1 --iscsi-listen "$P"
CH=(--chap alice alicesecret123 --mutual cairn cairnsecret456)
"$CLIENT" "${CH[@]}" verify "$P" "$TGT" 42 1024 || fail "data lost across kill -9"
[ "$("$CLIENT" "${CH[@]}" naa "$P" "$TGT")" = "$NAA" ] || fail "NAA id changed across restart"
# The client's sessions end asynchronously after it exits: wait for the count to drop.
for _ in $(seq 50); do
    run_ok "$CAIRN" iscsi list -H
    grep -Eq "	0$" "$LAST_STDOUT" && break
    sleep 0.1
done
expect_stdout "^$TGT	0	tank/vol1	[0-9a-f]{16}	iqn.2026-11.org.cairn.test:other,$ME	mutual	0$"
expect_stdout "^$TGT	3	tank/vol2	"
pass "restart keeps data, target, LUNs, NAA, ACL, CHAP"

# ---- export takes the LUNs offline, import brings them back ----
run_ok "$CAIRN" pool export tank
run_ok "$CAIRN" iscsi list -H
expect_stdout "^$TGT	-	-	-	"
run_ok "$CAIRN" pool import -d "$T/dev" tank
run_ok "$CAIRN" iscsi list -H
expect_stdout "^$TGT	0	tank/vol1	"
"$CLIENT" "${CH[@]}" verify "$P" "$TGT" 42 1024 || fail "data after export/import"
pass "export/import"

# ---- destroy -f removes the LUN first; target destroy -f ----
run_ok "$CAIRN" destroy -f tank/vol2
run_ok "$CAIRN" iscsi list -H
grep -q "tank/vol2" "$LAST_STDOUT" && fail "LUN of a destroyed volume still listed"
run_ok "$CAIRN" iscsi lun remove "$TGT" 0
run_ok "$CAIRN" destroy tank/vol1
run_ok "$CAIRN" iscsi target destroy "$TGT"
run_ok "$CAIRN" iscsi list -H
[ ! -s "$LAST_STDOUT" ] || fail "targets left: $(cat "$LAST_STDOUT")"
daemon_stop
daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" iscsi list -H
[ ! -s "$LAST_STDOUT" ] || fail "a destroyed target came back: $(cat "$LAST_STDOUT")"
pass "destroy"
