#!/usr/bin/env bash
# iSCSI targets are recorded in every imported pool. A pool exported while a target is
# created, or while a target's access list or CHAP changes, gets the target as it is now
# when it is imported again, so it alone brings the current configuration back after a
# restart without the other pools.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

T1=iqn.2026-11.org.cairn.test:one
T2=iqn.2026-11.org.cairn.test:two
X=iqn.2026-11.org.cairn.test:x
Y=iqn.2026-11.org.cairn.test:y
P=127.0.0.1:$(cairn_random_port)

sparse_files "$T/dev" 1G a b
daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" pool create other "$T/dev/b"
run_ok "$CAIRN" iscsi target create "$T1"
run_ok "$CAIRN" iscsi acl add "$T1" "$X"

run_ok "$CAIRN" pool export other
run_ok "$CAIRN" iscsi target create "$T2"
run_ok "$CAIRN" iscsi acl add "$T2" "$X"
run_ok "$CAIRN" iscsi chap set "$T2" alice alicesecret123
run_ok "$CAIRN" iscsi acl add "$T1" "$Y"
run_ok "$CAIRN" pool import -d "$T/dev" other
run_ok "$CAIRN" pool export tank

daemon_kill9
daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" pool list -H
grep -q '^tank' "$LAST_STDOUT" && fail "tank is imported: the test needs other alone"
run_ok "$CAIRN" iscsi list -H
expect_stdout "^$T2	-	-	-	$X	set	0$"
expect_stdout "^$T1	-	-	-	$X,$Y	-	0$"
pass "a pool imported after targets changed carries them as they are now"

# The served configuration wins over the older records of a pool that comes back.
run_ok "$CAIRN" iscsi acl remove "$T1" "$Y"
run_ok "$CAIRN" pool import -d "$T/dev" tank
run_ok "$CAIRN" iscsi list -H
expect_stdout "^$T1	-	-	-	$X	-	0$"
run_ok "$CAIRN" pool export other
daemon_stop
daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" iscsi list -H
expect_stdout "^$T1	-	-	-	$X	-	0$"
expect_stdout "^$T2	-	-	-	$X	set	0$"
pass "an older access list in a pool that comes back does not return"
