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
logs_section() { # the vdev names listed under "logs" in the last `pool status`
    awk '/^\tlogs$/ { on = 1; next } on && (!NF || /^\t[^ ]/) { on = 0 } on { print $1 }' "$LAST_STDOUT"
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

run_ok "$CAIRN" pool status zh
[ "$(logs_section | tr '\n' ' ')" = "$T/l/l1 mirror-2 $T/l/l2 $T/l/l3 " ] ||
    fail "log vdevs at create: $(cat "$LAST_STDOUT")"

# The log lives on l1 (the lowest id) while the writer runs.
start_writer
wait_acks 200
run_ok "$CAIRN" pool iostat -v -H -p zh 1 2
awk 'seen; /^arc\t/ { seen = 1 }' "$LAST_STDOUT" >"$T/second"
awk -F'\t' -v n="$T/l/l1" '$1 == n && $2 == "log" && $6 > 0 { ok = 1 } END { exit !ok }' "$T/second" ||
    fail "the intent log is not on the first log vdev: $(cat "$LAST_STDOUT")"

# Remove it under load: the mirror after it keeps its id.
run_ok "$CAIRN" pool remove zh "$T/l/l1"
grep -q 'log vdev 1 leaves a hole' "$T/d1.daemon.log" || fail "no hole for the removed log vdev"
run_ok "$CAIRN" pool status zh
[ "$(logs_section | tr '\n' ' ')" = "mirror-2 $T/l/l2 $T/l/l3 " ] ||
    fail "logs after removing the first: $(cat "$LAST_STDOUT")"
wait_acks 200
run_ok "$CAIRN" pool iostat -v -H -p zh 1 2
awk 'seen; /^arc\t/ { seen = 1 }' "$LAST_STDOUT" >"$T/second"
awk -F'\t' -v n="$T/l/l2" '$1 == n && $6 > 0 { ok = 1 } END { exit !ok }' "$T/second" ||
    fail "the intent log did not move to the mirror: $(cat "$LAST_STDOUT")"
crash_and_verify
run_ok "$CAIRN" pool status zh
[ "$(logs_section | tr '\n' ' ')" = "mirror-2 $T/l/l2 $T/l/l3 " ] ||
    fail "logs after the crash: $(cat "$LAST_STDOUT")"
pass "remove the first of two log vdevs under FUA writes, kill -9: every acknowledged write replays"

run_ok "$CAIRN" pool export zh
check_clean zh "$T/p"
run_ok "$CAIRN" pool create reuse1 "$T/l/l1"
run_ok "$CAIRN" pool destroy reuse1
run_ok "$CAIRN" pool import -d "$T/p" zh
run_ok "$CAIRN" pool status zh
[ "$(logs_section | tr '\n' ' ')" = "mirror-2 $T/l/l2 $T/l/l3 " ] ||
    fail "logs after export/import: $(cat "$LAST_STDOUT")"
run_ok "$CLIENT" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
pass "the hole survives export/import; check clean; the removed device is free for reuse"

# A new log device fills the hole (vdev 1 again) and takes the log; another crash.
run_ok "$CAIRN" pool add zh log "$T/l/l4"
grep -q 'log vdev 1 added (in the hole' "$T/d1.daemon.log" || fail "the new log vdev did not fill the hole"
run_ok "$CAIRN" pool status zh
[ "$(logs_section | tr '\n' ' ')" = "$T/l/l4 mirror-2 $T/l/l2 $T/l/l3 " ] ||
    fail "logs after adding one: $(cat "$LAST_STDOUT")"
ACKS="$T/acks2" SEED=22 # a new writer numbers its writes from 1 again
start_writer
wait_acks 200
run_ok "$CAIRN" pool iostat -v -H -p zh 1 2
awk 'seen; /^arc\t/ { seen = 1 }' "$LAST_STDOUT" >"$T/second"
awk -F'\t' -v n="$T/l/l4" '$1 == n && $6 > 0 { ok = 1 } END { exit !ok }' "$T/second" ||
    fail "the intent log is not on the new log device: $(cat "$LAST_STDOUT")"
crash_and_verify
pass "a log device added afterwards fills the hole; kill -9 under load loses nothing"

# Now the mirror is last: it goes, and the tree ends at the new device.
ACKS="$T/acks3" SEED=23
start_writer
wait_acks 100
run_ok "$CAIRN" pool remove zh mirror-2
wait_acks 100
run_ok "$CAIRN" pool status zh
[ "$(logs_section | tr '\n' ' ')" = "$T/l/l4 " ] || fail "logs after removing the mirror: $(cat "$LAST_STDOUT")"
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
