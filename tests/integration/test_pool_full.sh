#!/usr/bin/env bash
# A pool filled to the brim by synchronous writers stays up and keeps its word.
#
# An NFSv3 client writing 64 KiB FILE_SYNC records and an iSCSI initiator writing
# 4 KiB FUA blocks to a sparse LUN (its 16 KiB volume blocks rewritten in pieces,
# which leaves the free space in small holes) run together until the pool refuses
# them. Then: cairnd is alive, the pool ONLINE, not suspended; the refusals were
# "no space" (the writers saw errors and retried); a new write gets ENOSPC. cairnd is
# killed with SIGKILL while the writers still retry, and after the restart every
# acknowledged record and block reads back. Removing the file gives the space back
# (writes succeed again), and the offline check finds every block, gang blocks
# included, with nothing leaked.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

ISCSI="$CAIRN_BIN/iscsi_client"
TGT=iqn.2026-12.org.cairn.test:full
P=127.0.0.1:$(cairn_random_port)

sparse_files "$T/dev" 512M a
nfs_daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/fs
run_ok "$CAIRN" create -s -o volblocksize=16K -V 1G tank/vol
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" tank/vol
URL=$(nfs_url /tank/fs)

lines() { wc -l <"$1" 2>/dev/null || echo 0; }

"$NFSCLIENT" "$URL" hawrite rec >"$T/nfs.out" 2>"$T/nfs.err" &
p_nfs=$!
"$ISCSI" hawrite "$P" "$TGT" 7 262144 >"$T/lun.out" 2>"$T/lun.err" &
p_lun=$!

# refused: both writers have been told "no space" at least once.
refused() { grep -q "^retry" "$T/nfs.err" && grep -q "DATA PROTECTION.*0x2707" "$T/lun.err"; }
# Until both were refused and neither has made progress for 5 s since (the pool is
# full), at most 480 s. A stall alone is not "full": on a loaded machine (ASan) a
# txg sync can hold both writers that long before the pool has filled.
last=-1 still=0
for _ in $(seq 1 960); do
    kill -0 "$DAEMON_PID" 2>/dev/null || fail "cairnd died while the pool filled: $(tail -5 "$T/d1.daemon.log")"
    now=$(( $(lines "$T/nfs.out") + $(lines "$T/lun.out") ))
    if [ "$now" = "$last" ] && refused; then still=$((still + 1)); else still=0; fi
    last=$now
    [ "$still" -ge 10 ] && break
    sleep 0.5
done
[ "$still" -ge 10 ] || fail "the writers never stopped: the pool did not fill in 480 s" \
    "(NFS: $(grep -c '^retry' "$T/nfs.err") refusals, iSCSI: $(grep -c '0x2707' "$T/lun.err"))"
run_ok "$CAIRN" pool list -H -p tank
IFS=$'\t' read -r _ size alloc _ _ _ health _ <"$LAST_STDOUT"
cap=$(( alloc * 100 / size ))
[ "$health" = ONLINE ] || fail "a full pool is $health, not ONLINE"
[ "$cap" -ge 85 ] || fail "the writers stopped with the pool only $cap% full"
grep -q "suspended" "$T/d1.daemon.log" && fail "the pool was suspended: $(grep suspended "$T/d1.daemon.log")"
grep -q "^retry" "$T/nfs.err" || fail "the NFS writer was never refused"
grep -q "DATA PROTECTION.*0x2707" "$T/lun.err" ||
    fail "the initiator was not told SPACE ALLOCATION FAILED: $(tail -2 "$T/lun.err")"
"$NFSCLIENT" "$URL" put extra hello >"$T/put.out" 2>&1 && fail "a new file on a full pool was created"
# (libnfs reports the CREATE's NFS3ERR_NOSPC, but a refused WRITE without its status)
grep -q "NOSPC\|pwrite call failed" "$T/put.out" || fail "a new file on a full pool: $(cat "$T/put.out")"
pass "pool full at $cap%: ONLINE, writers refused with ENOSPC, cairnd up"

# SIGKILL while the writers retry; everything acknowledged must come back.
daemon_kill9
kill -9 "$p_nfs" "$p_lun" 2>/dev/null || true
wait "$p_nfs" "$p_lun" 2>/dev/null || true
nfs_n=$(lines "$T/nfs.out")
lun_n=$(lines "$T/lun.out")
[ "$nfs_n" -ge 1 ] && [ "$lun_n" -ge 1 ] || fail "nothing acknowledged: nfs $nfs_n, lun $lun_n"
nfs_daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" pool list -H -p tank
IFS=$'\t' read -r _ _ _ _ _ _ health _ <"$LAST_STDOUT"
[ "$health" = ONLINE ] || fail "after the restart: $("$CAIRN" pool status tank)"
URL=$(nfs_url /tank/fs)
nfs_client "$URL" verify rec "$nfs_n"
"$ISCSI" verify "$P" "$TGT" 7 "$lun_n" ||
    fail "an acknowledged iSCSI write (of $lun_n) is missing after SIGKILL on a full pool"
pass "$nfs_n FILE_SYNC records and $lun_n FUA blocks survived SIGKILL on a full pool"

# The space comes back: the file goes, the next write fits.
used_full=$(ds_get used tank/fs)
nfs_client "$URL" rm rec
for _ in $(seq 1 600); do # the frees come back a few txgs later: bounded, not paced
    [ "$(ds_get used tank/fs)" -lt $((used_full / 4)) ] && break
    sleep 0.1
done
[ "$(ds_get used tank/fs)" -lt $((used_full / 4)) ] || fail "used stayed at $(ds_get used tank/fs) after the remove"
nfs_client "$URL" fill again 16777216 >"$T/fill2.out" 2>&1 || fail "a write after the remove: $(cat "$T/fill2.out")"
pass "space came back after the remove"

for _ in $(seq 50); do
    "$CAIRN" pool export tank 2>/dev/null && break
    sleep 0.2
done
daemon_stop
run_ok "$CAIRN" check -d "$T/dev" tank
grep "gang blocks" "$LAST_STDOUT" || true
pass "cairn check after filling the pool"
