#!/usr/bin/env bash
# Removing a log vdev that is not the last top-level vdev. A pool with two log vdevs (a
# device, vdev 1, and a mirror, vdev 2): `pool remove` of the first while an iSCSI
# initiator does FUA writes, then kill -9: every acknowledged write replays, the mirror is
# still `mirror-2` (the removed vdev left a hole, so ids - which block pointers name - did
# not shift), across the crash and an export/import; `cairn check` is clean. A new log
# device takes the hole; another crash loses nothing; then the mirror goes too. Cache
# devices: the first of two can be removed as well.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CLIENT="$CAIRN_BIN/iscsi_client"
TGT=iqn.2026-11.org.cairn.test:loghole
PORT=$(cairn_random_port)
P=127.0.0.1:$PORT
BLOCKS=2048

sparse_files "$T/p" 512M a
sparse_files "$T/l" 128M l1 l2 l3 l4
sparse_files "$T/c" 64M c1 c2
# txg_timeout=300: txgs sync only when asked, so acknowledged writes live in the log.
daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" pool create -o txg_timeout=300 zh "$T/p/a" log "$T/l/l1" mirror "$T/l/l2" "$T/l/l3"
run_ok "$CAIRN" create -V 64M zh/vol
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" zh/vol

ACKS="$T/acks"
SEED=21
expect_logs() { # expect_logs WHEN NAME...: `pool status` lists exactly NAME... under "logs"
    local when=$1 listed; shift
    run_ok "$CAIRN" pool status zh
    listed=$(awk '/^\tlogs$/ { on = 1; next } on && (!NF || /^\t[^ ]/) { on = 0 } on { print $1 }' \
        "$LAST_STDOUT" | tr '\n' ' ')
    [ "$listed" = "$* " ] || fail "log vdevs $when: $(cat "$LAST_STDOUT")"
}
expect_log_writes() { # expect_log_writes LEAF WHY: log device LEAF is written to (1 s of iostat)
    run_ok "$CAIRN" pool iostat -v -H -p zh 1 2
    awk 'seen; /^arc\t/ { seen = 1 }' "$LAST_STDOUT" >"$T/second"
    awk -F'\t' -v n="$1" '$1 == n && $2 == "log" && $6 > 0 { ok = 1 } END { exit !ok }' "$T/second" ||
        fail "$2: $(cat "$LAST_STDOUT")"
}
crash_and_verify() { # kill -9 under load, restart: every acknowledged write is there
    local mark
    daemon_kill9
    stop_writer
    wait_unlocked "$T/p/a"
    mark=$(wc -l <"$T/d1.daemon.log")
    daemon_start d1 --iscsi-listen "$P"
    run_ok "$CLIENT" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
    tail -n +"$((mark + 1))" "$T/d1.daemon.log" | grep -q "replayed [1-9]" ||
        fail "nothing was replayed after the crash"
}

expect_logs "at create" "$T/l/l1" mirror-2 "$T/l/l2" "$T/l/l3"

# The log lives on l1 (the lowest id) while the writer runs.
start_writer
wait_acks 200
expect_log_writes "$T/l/l1" "the intent log is not on the first log vdev"

# Remove it under load: the mirror after it keeps its id.
run_ok "$CAIRN" pool remove zh "$T/l/l1"
grep -q 'log vdev 1 leaves a hole' "$T/d1.daemon.log" || fail "no hole for the removed log vdev"
expect_logs "after removing the first" mirror-2 "$T/l/l2" "$T/l/l3"
wait_acks 200
expect_log_writes "$T/l/l2" "the intent log did not move to the mirror"
crash_and_verify
expect_logs "after the crash" mirror-2 "$T/l/l2" "$T/l/l3"
pass "remove the first of two log vdevs under FUA writes, kill -9: every acknowledged write replays"

run_ok "$CAIRN" pool export zh
check_clean zh "$T/p"
run_ok "$CAIRN" pool create reuse1 "$T/l/l1"
run_ok "$CAIRN" pool destroy reuse1
run_ok "$CAIRN" pool import -d "$T/p" zh
expect_logs "after export/import" mirror-2 "$T/l/l2" "$T/l/l3"
run_ok "$CLIENT" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
pass "the hole survives export/import; check clean; the removed device is free for reuse"

# A new log device fills the hole (vdev 1 again) and takes the log; another crash.
run_ok "$CAIRN" pool add zh log "$T/l/l4"
grep -q 'log vdev 1 added (in the hole' "$T/d1.daemon.log" || fail "the new log vdev did not fill the hole"
expect_logs "after adding one" "$T/l/l4" mirror-2 "$T/l/l2" "$T/l/l3"
ACKS="$T/acks2" SEED=22 # a new writer numbers its writes from 1 again
start_writer
wait_acks 200
expect_log_writes "$T/l/l4" "the intent log is not on the new log device"
crash_and_verify
pass "a log device added afterwards fills the hole; kill -9 under load loses nothing"

# Now the mirror is last: it goes, and the tree ends at the new device.
ACKS="$T/acks3" SEED=23
start_writer
wait_acks 100
run_ok "$CAIRN" pool remove zh mirror-2
wait_acks 100
expect_logs "after removing the mirror" "$T/l/l4"
crash_and_verify
run_ok "$CAIRN" pool export zh
check_clean zh "$T/p"
run_ok "$CAIRN" pool import -d "$T/p" zh
pass "then the mirror goes too; check clean"

# Cache devices: any of them can go.
run_ok "$CAIRN" pool add zh cache "$T/c/c1" "$T/c/c2"
run_ok "$CAIRN" pool remove zh "$T/c/c1"
run_ok "$CAIRN" arcstat -v
! grep -q "$T/c/c1" "$LAST_STDOUT" || fail "removed cache device still listed: $(cat "$LAST_STDOUT")"
expect_stdout "^zh +$T/c/c2 +ONLINE "
run_ok "$CLIENT" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
run_ok "$CAIRN" pool export zh
check_clean zh "$T/p"
pass "the first of two cache devices is removed; the second stays"
daemon_stop
