#!/usr/bin/env bash
# Log devices on a live pool: `pool add POOL log mirror DEV DEV` (the intent log's new
# blocks land there), `pool remove POOL mirror-N` while an iSCSI initiator does FUA
# writes, then kill -9 of the daemon: every acknowledged write is there after the
# restart, and the pool checks clean without the removed devices, which can be reused.
# Then a kill -9 in the middle of a removal: the pool comes back either way, complete.
# Last, a log device lost in a crash: the import is refused naming it, `import -m` says
# what it drops, and `pool remove` of the missing device makes the pool whole again.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CLIENT="$CAIRN_BIN/iscsi_client"
TGT=iqn.2026-11.org.cairn.test:logdev
PORT=$(cairn_random_port)
P=127.0.0.1:$PORT
BLOCKS=2048

sparse_files "$T/p" 512M a
sparse_files "$T/l" 128M l1 l2 l3 l4
# txg_timeout=300: txgs sync only when asked, so acknowledged writes live in the log.
daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" pool create -o txg_timeout=300 zl "$T/p/a"
run_ok "$CAIRN" create -V 64M zl/vol
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" zl/vol

ACKS="$T/acks"
SEED=7

run_ok "$CAIRN" pool add zl log mirror "$T/l/l1" "$T/l/l2"
mark=$(wc -l <"$T/d1.daemon.log")
run_ok "$CAIRN" pool status zl
grep -A3 '^	logs$' "$LAST_STDOUT" | grep -q "mirror-1" || fail "no log mirror under logs: $(cat "$LAST_STDOUT")"
grep -A3 '^	logs$' "$LAST_STDOUT" | grep -q "$T/l/l2" || fail "log device not under logs: $(cat "$LAST_STDOUT")"
grep -q 'log vdev 1 holds' "$T/d1.daemon.log" || fail "no intent-log region on the added log vdev"
run_ok "$CAIRN" pool list -H -p zl
[ "$(cut -f2 "$LAST_STDOUT")" -lt $((520 * 1024 * 1024)) ] || fail "log devices counted in the pool size"
pass "pool add POOL log mirror DEV DEV"

# Sync writes go to the new log devices: their leaves' write counts grow.
start_writer
wait_acks 200
run_ok "$CAIRN" pool iostat -v -H -p zl 1 2
awk -F'\t' -v n="$T/l/l1" '$1 == n && $2 == "log" { w = $6 } END { exit !(w > 0) }' "$LAST_STDOUT" ||
    fail "no writes on the log device while FUA writes run: $(cat "$LAST_STDOUT")"
! tail -n +"$mark" "$T/d1.daemon.log" | grep -q 'intent-log region grown' ||
    fail "the log grew on the main vdevs although it has a log device"
pass "FUA writes land on the added log device"

# Remove it under load; more writes are acknowledged after, then the daemon dies.
run_ok "$CAIRN" pool remove zl mirror-1
run_ok "$CAIRN" pool status zl
! grep -q 'logs' "$LAST_STDOUT" || fail "log mirror still listed after its removal: $(cat "$LAST_STDOUT")"
wait_acks 200
daemon_kill9
stop_writer
wait_unlocked "$T/p/a"
daemon_start d1 --iscsi-listen "$P"
run_ok "$CLIENT" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
echo "$(cat "$LAST_STDOUT")"
grep -q "replayed [1-9]" "$T/d1.daemon.log" || fail "nothing was replayed after the crash"
run_ok "$CAIRN" pool export zl
check_clean zl "$T/p"
run_ok "$CAIRN" pool create reuse1 "$T/l/l1"
run_ok "$CAIRN" pool destroy reuse1
run_ok "$CAIRN" pool import -d "$T/p" zl
pass "remove a log mirror under FUA writes, kill -9: every acknowledged write replays; check clean"

# A crash in the middle of a removal: whichever side of it the pool comes back on, it
# imports, replays completely and checks clean.
run_ok "$CAIRN" pool add zl log "$T/l/l3"
ACKS="$T/acks2" SEED=8 # a new writer numbers its writes from 1 again
start_writer
wait_acks 100
"$CAIRN" pool remove zl "$T/l/l3" >"$T/rm.out" 2>&1 &
rmpid=$!
wait_acks 20
daemon_kill9
wait "$rmpid" 2>/dev/null || true
stop_writer
wait_unlocked "$T/p/a" "$T/l/l3"
daemon_start d1 --iscsi-listen "$P"
run_ok "$CLIENT" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
run_ok "$CAIRN" pool status zl
if grep -q "$T/l/l3" "$LAST_STDOUT"; then
    echo "the removal had not happened yet"
    run_ok "$CAIRN" pool remove zl "$T/l/l3"
fi
run_ok "$CAIRN" pool export zl
check_clean zl "$T/p"
pass "kill -9 during a removal: the pool imports complete either way"

run_ok "$CAIRN" pool import -d "$T/p" zl
run_ok "$CAIRN" pool add zl log "$T/l/l4"
ACKS="$T/acks3" SEED=9
start_writer
wait_acks 100
daemon_kill9
stop_writer
wait_unlocked "$T/p/a" "$T/l/l4"
mkdir -p "$T/gone"
mv "$T/l/l4" "$T/gone/"
daemon_start d1 --iscsi-listen "$P"
grep -q "cannot import cached pool 'zl'.*log device '$T/l/l4' is missing" "$T/d1.daemon.log" ||
    fail "the cached import did not stop at the missing log device"
run_fail "$CAIRN" pool import -f -d "$T/p" zl
expect_stderr "log device '$T/l/l4' is missing; import with -m"
run_ok "$CAIRN" pool import -f -m -d "$T/p" zl
grep -q "^cairn: warning: pool 'zl' imported without its log device '$T/l/l4': synchronous writes that only it held are lost" \
    "$LAST_STDERR" || fail "import -m said nothing about the dropped log: $(cat "$LAST_STDERR")"
run_ok "$CAIRN" pool status zl
grep -q 'state: DEGRADED' "$LAST_STDOUT" || fail "not DEGRADED without its log device: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool remove zl "$T/l/l4"
run_ok "$CAIRN" pool status zl
grep -q 'state: ONLINE' "$LAST_STDOUT" || fail "still degraded after removing the lost log device: $(cat "$LAST_STDOUT")"
! grep -q 'logs' "$LAST_STDOUT" || fail "lost log device still listed: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool export zl
check_clean zl "$T/p"
pass "lost log device: import refused naming it, -m warns on the command line, remove makes the pool whole"

# A pool with a log device from the start has no log region on its data vdevs: removing
# the device under load makes the intent log reserve one there (the log device's own
# region, larger than the eighth of the pool a data-vdev region may take, must not count).
sparse_files "$T/q" 512M qa
run_ok "$CAIRN" pool create -o txg_timeout=300 z2 "$T/q/qa" log mirror "$T/l/l1" "$T/l/l2"
run_ok "$CAIRN" create -V 64M z2/vol
TGT=iqn.2026-11.org.cairn.test:logdev2
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" z2/vol
ACKS="$T/acks4" SEED=10
start_writer
wait_acks 100
mark=$(wc -l <"$T/d1.daemon.log")
run_ok "$CAIRN" pool remove z2 mirror-1
wait_acks 100
tail -n +"$mark" "$T/d1.daemon.log" | grep -q 'intent-log region grown' ||
    fail "no log region reserved on the data vdevs after removing the only log device"
daemon_kill9
stop_writer
wait_unlocked "$T/q/qa"
daemon_start d1 --iscsi-listen "$P"
run_ok "$CLIENT" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
run_ok "$CAIRN" pool export z2
check_clean z2 "$T/q"
pass "removing the only log device under load: the log moves to the data vdevs, nothing lost"
