#!/usr/bin/env bash
# A missing disk that comes back is taken back by itself (files as disks; a
# "fault:FILE" leaf fails every I/O with ENXIO while FILE is moved away, as an
# unplugged disk does, and with EIO while FILE.eio exists).
#  - a 3-way mirror with a spare under an iSCSI initiator's FUA writes and NFS writes:
#    a disk's file moved away makes it UNAVAIL ("device gone"), the pool DEGRADED, and
#    the spare steps in;
#  - a blank file, then another pool's disk, put at its path are refused (an event
#    each, `pool online` refused with one line) and the pool stays DEGRADED;
#  - the original file moved back: without any command the disk is ONLINE again,
#    resilvered, the spare AVAIL again; events statechange UNAVAIL/ONLINE, resilver
#    start/finish; every acknowledged write and NFS file verifies, a scrub finds nothing;
#  - an older copy of a disk (taken while it was offline) put back in its place after
#    it went missing: taken back, and the resilver also rewrites what the copy lacks
#    (a scrub then repairs nothing);
#  - a disk pulled out whose I/O fails with EIO (not ENXIO): its path no longer
#    names it, so it is UNAVAIL as well, and taken back;
#  - a FAULTED disk (too many errors) and an OFFLINE one are not taken back by the
#    probe, though their devices answer: another missing disk is taken back meanwhile;
#    the spare, back in the list, steps in again for the FAULTED one;
#  - a plain file leaf (io_uring; its I/O goes on through its descriptor) moved away
#    is noticed by the probe and UNAVAIL, and taken back when it is there again;
#  - a disk missing at import is UNAVAIL and is taken back once its file is there again;
#    `cairn check` is clean after export;
#  - with vdev_probe_interval_ms = 0 nothing is probed: `pool online` takes it back.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

BLOCKS=2048
cat >"$T/cairnd.conf" <<EOF
fault_errors = 5
vdev_probe_interval_ms = 200
EOF
PORT=$(cairn_random_port)
P=127.0.0.1:$((PORT + 3))
nfs_daemon_start d1 --config "$T/cairnd.conf" --iscsi-listen "$P"

d=$T/m a=$T/away # moved away: out of the directory imports scan
mkdir -p "$a"
sparse_files "$d" 256M l1 l2 l3 s1 o1 o2
L1=fault:$d/l1 L2=fault:$d/l2 L3=fault:$d/l3
run_ok "$CAIRN" pool create rp mirror "$L1" "$L2" "$L3" spare "$d/s1"
run_ok "$CAIRN" create -o sharenfs=no_root_squash rp/fs
run_ok "$CAIRN" pool create other mirror "$d/o1" "$d/o2"
run_ok "$CAIRN" pool export other

events() { run_ok "$CAIRN" pool events -H rp; }
# wait_event PATTERN: until `pool events` of rp has a line matching the regex.
wait_event() {
    local i
    for i in $(seq 1 300); do
        events
        grep -Eq -- "$1" "$LAST_STDOUT" && return 0
        sleep 0.1
    done
    fail "no event /$1/: $(tail -n 20 "$LAST_STDOUT")"
}
# pool_state: the pool's state line.
pool_state() { run_ok "$CAIRN" pool status rp; sed -n 's/^ *state: //p' "$LAST_STDOUT"; }

# ---- a disk pulled out under load, wrong disks at its path, then the right one ----
iscsi_lun_setup rp
ACKS="$T/acks.rp" SEED=31
start_writer
pool_put rp a 16
mv "$d/l2" "$a/l2"
pool_put rp b 8 # NFS writes while the disk goes
wait_acks 100
wait_state rp "$L2" UNAVAIL
wait_spare_in rp "$d/s1"
expect_stdout "state: DEGRADED"
wait_event "statechange	rp	vdev=$L2 state=UNAVAIL reason=device gone"
pass "a disk whose file is moved away is UNAVAIL under load; the spare steps in"

truncate -s 256M "$d/l2" # a blank disk at its path
wait_event "vdev\.bad_label	rp	vdev=$L2 reason=it has no label of a pool"
[ "$(leaf_state rp "$L2")" = UNAVAIL ] || fail "a blank disk was taken: $(cat "$LAST_STDOUT")"
expect_stdout "status: One or more devices could not be opened"
expect_stdout "action: Attach the missing device: it is taken back by itself"
run_fail "$CAIRN" pool online rp "$L2"
expect_stderr "cannot online '$L2': it has no label of a pool; replace it"
rm "$d/l2"
cp --sparse=always "$d/o1" "$d/l2" # another pool's disk
wait_event "vdev\.bad_label	rp	vdev=$L2 reason=it belongs to pool 'other'"
[ "$(leaf_state rp "$L2")" = UNAVAIL ] || fail "another pool's disk was taken: $(cat "$LAST_STDOUT")"
[ "$(pool_state)" = DEGRADED ] || fail "pool not DEGRADED with a foreign disk at $L2"
pool_put rp c 8
wait_acks 100
pass "a blank disk and another pool's disk at its path are refused"

rm "$d/l2"
mv "$a/l2" "$d/l2" # the disk is back
wait_state rp "$L2" ONLINE
run_ok "$CAIRN" pool wait -t resilver rp
wait_spare_avail rp "$d/s1"
[ "$(pool_state)" = ONLINE ] || fail "pool not ONLINE: $(cat "$LAST_STDOUT")"
wait_event "statechange	rp	vdev=$L2 state=ONLINE"
events
grep -q "resilver_start" "$LAST_STDOUT" && grep -q "resilver_finish" "$LAST_STDOUT" ||
    fail "no resilver events: $(cat "$LAST_STDOUT")"
stop_writer
run_ok "$CAIRN_BIN/iscsi_client" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
pool_verify_all rp
scrub_clean rp
for l in "$L1" "$L2" "$L3"; do # (l2's I/O errors while gone stay counted until clear)
    row=$(leaf_row "$l")
    [ "${row%% *}" = ONLINE ] && [ "${row##* }" = 0 ] || fail "$l after the scrub: $row"
done
pass "the disk moved back is taken back by itself, resilvered, the spare returns; data verifies"

# ---- an older copy of the disk restored in its place ----
run_ok "$CAIRN" pool offline rp "$L3"
cp --sparse=always "$d/l3" "$d/l3.old" # a consistent image: an offline disk takes no I/O
run_ok "$CAIRN" pool online rp "$L3"
run_ok "$CAIRN" pool wait -t resilver rp
pool_put rp d 16 # blocks the copy never saw, born before the disk goes
mv "$d/l3" "$a/l3"
pool_put rp e 4
wait_state rp "$L3" UNAVAIL
mv "$d/l3.old" "$d/l3"
wait_state rp "$L3" ONLINE
run_ok "$CAIRN" pool wait -t resilver rp
wait_spare_avail rp "$d/s1"
pool_verify_all rp
scrub_clean rp
pass "an older copy put back is resilvered with everything it lacks (scrub repairs nothing)"

# ---- a disk pulled out whose driver answers EIO rather than ENXIO ----
# One rename does both at once (the file leaves its path and "l3.eio" appears):
# with a touch before a move, a sync in between met EIO from a disk its path
# still named, and five such errors fault it (FAULTED, not UNAVAIL).
mv "$d/l3" "$d/l3.eio" # its path no longer names it: missing, not failing
pool_put rp e2 4
wait_state rp "$L3" UNAVAIL
mv "$d/l3.eio" "$d/l3"
wait_state rp "$L3" ONLINE
run_ok "$CAIRN" pool wait -t resilver rp
wait_spare_avail rp "$d/s1"
pass "a disk pulled out that fails with EIO is UNAVAIL too, and taken back"

# ---- FAULTED and OFFLINE disks are not the probe's ----
touch "$d/l1.eio"
pool_put rp f 4
wait_state rp "$L1" FAULTED
wait_spare_in rp "$d/s1" # the spare that stepped back out serves again
rm "$d/l1.eio" # it answers again; only the administrator takes it back
mv "$d/l2" "$a/l2"
pool_put rp g 4
wait_state rp "$L2" UNAVAIL
mv "$a/l2" "$d/l2"
wait_state rp "$L2" ONLINE # the probe ran
[ "$(leaf_state rp "$L1")" = FAULTED ] || fail "a FAULTED disk was taken back: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool clear rp "$L1"
run_ok "$CAIRN" pool wait -t resilver rp
wait_spare_avail rp "$d/s1"
run_ok "$CAIRN" pool offline rp "$L1"
mv "$d/l2" "$a/l2"
pool_put rp h 4
wait_state rp "$L2" UNAVAIL
mv "$a/l2" "$d/l2"
wait_state rp "$L2" ONLINE
[ "$(leaf_state rp "$L1")" = OFFLINE ] || fail "an OFFLINE disk was brought online: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool online rp "$L1"
run_ok "$CAIRN" pool wait -t resilver rp
pool_verify_all rp
scrub_clean rp
pass "FAULTED and OFFLINE disks stay so while a missing one is taken back"

# ---- a plain file leaf (its I/O never fails) moved away and back ----
sparse_files "$d" 256M p1 p2
run_ok "$CAIRN" pool create fp mirror "$d/p1" "$d/p2"
run_ok "$CAIRN" create -o sharenfs=no_root_squash fp/fs
pool_put fp a 8
mv "$d/p2" "$a/p2"
wait_state fp "$d/p2" UNAVAIL
pool_put fp b 8
mv "$a/p2" "$d/p2"
wait_state fp "$d/p2" ONLINE
run_ok "$CAIRN" pool wait -t resilver fp
pool_verify_all fp
scrub_clean fp
run_ok "$CAIRN" pool destroy fp
pass "a file leaf moved away (its I/O still works) is UNAVAIL, and taken back"

# ---- a disk missing at import ----
run_ok "$CAIRN" pool export rp
mv "$d/l2" "$a/l2"
run_ok "$CAIRN" pool import -d "$d" rp
[ "$(leaf_state rp "$L2")" = UNAVAIL ] || fail "l2 missing at import: $(cat "$LAST_STDOUT")"
expect_stdout "state: DEGRADED"
wait_spare_in rp "$d/s1" # free again after the import
pool_put rp i 8
mv "$a/l2" "$d/l2"
wait_state rp "$L2" ONLINE
run_ok "$CAIRN" pool wait -t resilver rp
wait_spare_avail rp "$d/s1"
pool_verify_all rp
scrub_clean rp
run_ok "$CAIRN" pool export rp
check_clean rp "$d"
pass "a disk missing at import is taken back once it is there; check clean"

# ---- vdev_probe_interval_ms = 0: nothing is probed; `pool online` takes the disk back ----
daemon_stop
cat >"$T/noprobe.conf" <<EOF2
fault_errors = 5
vdev_probe_interval_ms = 0
EOF2
nfs_daemon_start d1 --config "$T/noprobe.conf" --iscsi-listen "$P"
mv "$d/l2" "$a/l2"
run_ok "$CAIRN" pool import -d "$d" rp
[ "$(leaf_state rp "$L2")" = UNAVAIL ] || fail "l2 missing at import: $(cat "$LAST_STDOUT")"
pool_put rp j 4
mv "$a/l2" "$d/l2"
pool_put rp k 4
[ "$(leaf_state rp "$L2")" = UNAVAIL ] || fail "l2 taken back with probing off: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool online rp "$L2"
[ "$(leaf_state rp "$L2")" = ONLINE ] || fail "online did not take l2 back: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool wait -t resilver rp
wait_spare_avail rp "$d/s1"
pool_verify_all rp
scrub_clean rp
pass "with probing off a missing disk stays out until 'pool online' takes it back"
