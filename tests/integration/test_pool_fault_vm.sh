#!/usr/bin/env bash
# The Linux kernel's NFS client and iSCSI initiator through a disk's whole service
# life: a Debian guest under qemu (../shared/vm) mounts Cairn's share (NFSv4.1) and logs
# in to a LUN of the same pool (a 2-way mirror of fault-injecting leaves with a hot
# spare), then keeps writing (fsync'ed files over NFS, O_DIRECT|O_DSYNC blocks over
# iSCSI) and reading each back, while the host
#   1. makes a mirror side stop answering: it is FAULTED and the spare steps in and is
#      resilvered, by itself;
#   2. replaces the failed side with a new disk: the resilver runs and the spare steps
#      back out (AVAIL);
# and the guest goes on for a few more rounds after each step. Then the guest remounts
# and checks every file and block it wrote (md5) and that its kernel logged no I/O error
# (no "I/O error", sense data, connection error or "server not responding"); the host
# reads every file back through libnfs with the guest's checksums, a scrub finds
# nothing and `cairn check` is clean. The VM runs under TCG (slow): the data is small
# (256 KiB a round). Exits 77 (skip) only when the VM image cannot be built.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

vm_require

cat >"$T/cairnd.conf" <<EOF
fault_errors = 5
EOF
ISCSI_PORT=$(cairn_random_port)
TGT=iqn.2026-12.org.cairn.test:faultvm
nfs_daemon_start d1 --config "$T/cairnd.conf" --iscsi-listen "127.0.0.1:$ISCSI_PORT"
d=$T/dev
sparse_files "$d" 512M l1 l2 s1 new
L2=fault:$d/l2
run_ok "$CAIRN" pool create tank mirror "fault:$d/l1" "$L2" spare "$d/s1"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/fs
run_ok "$CAIRN" create -V 64M tank/vol
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" tank/vol

GUEST="$T/guest-fault.sh"
cat >"$GUEST" <<'GUEST_SCRIPT'
#!/bin/bash
set -u
M=/mnt/nfs
PORTAL=$SERVER:$ISCSI_PORT
IQN=$GUEST_ISCSI_IQN
SLOTS=200 # 256 KiB blocks of the LUN the rounds write in turn (50 MiB of 64)
BAD='I/O error|Sense Key|conn error|timing out command|not responding|blk_update_request|critical'
fail() { echo "FAIL: $*"; dmesg | tail -n 30; exit 1; }
mkdir -p $M /tmp/slot
# lookupcache=none, actimeo=0: the host's "done" file is seen as soon as it is there.
timeout 60 mount -t nfs4 -o vers=4.1,port=$NFS_PORT,hard,lookupcache=none,actimeo=0 \
    $SERVER:/tank/fs $M || fail "mount"
modprobe -a iscsi_tcp sd_mod || fail "modprobe"
iscsid || fail "iscsid"
iscsiadm -m node -T "$IQN" -p "$PORTAL" -o new >/dev/null || fail "node -o new"
iscsi_login
: >/tmp/sums
i=0
while [ ! -e $M/done ]; do
    i=$((i + 1))
    [ $i -le 2000 ] || fail "the host never said done"
    dd if=/dev/urandom of=/tmp/chunk bs=256k count=1 status=none
    sum=$(md5sum </tmp/chunk | cut -d' ' -f1)
    dd if=/tmp/chunk of=$M/f$i bs=256k conv=fsync status=none || fail "NFS write of f$i"
    echo "$sum  f$i" >>/tmp/sums
    slot=$((i % SLOTS))
    dd if=/tmp/chunk of=$dev bs=256k seek=$slot oflag=direct,dsync conv=notrunc status=none ||
        fail "iSCSI write of block $slot"
    echo "$sum" >/tmp/slot/$slot
    [ "$(dd if=$dev bs=256k skip=$slot count=1 iflag=direct status=none | md5sum | cut -d' ' -f1)" = "$sum" ] ||
        fail "iSCSI read of block $slot"
    [ "$(md5sum <$M/f$i | cut -d' ' -f1)" = "$sum" ] || fail "NFS read of f$i"
    echo "WROTE $i"
done
umount $M || fail "umount"
timeout 60 mount -t nfs4 -o vers=4.1,port=$NFS_PORT $SERVER:/tank/fs $M || fail "remount"
(cd $M && md5sum -c --quiet /tmp/sums) || fail "NFS files differ after the remount"
for f in /tmp/slot/*; do
    slot=${f##*/}
    [ "$(dd if=$dev bs=256k skip=$slot count=1 iflag=direct status=none | md5sum | cut -d' ' -f1)" = "$(cat $f)" ] ||
        fail "iSCSI block $slot differs at the end"
done
umount $M
timeout 60 iscsiadm -m node -T "$IQN" -p "$PORTAL" --logout >/dev/null || fail "logout"
if dmesg | grep -iE "$BAD"; then fail "the kernel logged I/O trouble"; fi
sed 's/^/SUM /' /tmp/sums
echo "PASS: $i rounds, $(wc -l </tmp/sums) files, $(ls /tmp/slot | wc -l) blocks verified"
GUEST_SCRIPT
sed -i "1r $CAIRN_SRC/tests/integration/vm_guest_iscsi.sh" "$GUEST"

VM_NFS_PORT=$NFS_PORT VM_ISCSI_PORT=$ISCSI_PORT VM_TIMEOUT=600 GUEST_TIMEOUT=540 \
    GUEST_ISCSI_IQN=$TGT "$VM_DIR/run-vm.sh" "$GUEST" >"$T/vm.out" 2>&1 &
VMPID=$!
CAIRN_DAEMON_PIDS+=("$VMPID") # killed with the daemons if the test fails

rounds() { grep -c '^WROTE' "$T/vm.out" || true; }
# guest_rounds N: until the guest finished N more rounds (its I/O goes on).
guest_rounds() {
    local want=$(($(rounds) + $1)) k
    for k in $(seq 1 3000); do
        [ "$(rounds)" -ge "$want" ] && return 0
        kill -0 "$VMPID" 2>/dev/null || { cat "$T/vm.out"; fail "the guest stopped"; }
        sleep 0.2
    done
    cat "$T/vm.out"
    fail "the guest made no progress: $(rounds) rounds"
}

guest_rounds 5
touch "$d/l2.eio"
wait_spare_in tank "$d/s1"
grep -q "$L2 .*FAULTED" "$LAST_STDOUT" || fail "l2 not FAULTED under the spare: $(cat "$LAST_STDOUT")"
guest_rounds 5
run_ok "$CAIRN" pool replace tank "$L2" "$d/new"
guest_rounds 3
run_ok "$CAIRN" pool wait -t resilver tank
wait_spare_avail tank "$d/s1"
expect_stdout "state: ONLINE"
guest_rounds 5
nfs_client "$(nfs_url /tank/fs)" put done "x"
rc=0
wait "$VMPID" || rc=$?
cat "$T/vm.out"
[ "$rc" -eq 0 ] || fail "the guest failed (rc $rc)"
grep -q "^PASS: " "$T/vm.out" || fail "no pass line from the guest"
run_ok "$CAIRN" pool events -H tank
for c in "sysevent.fs.cairn.vdev_spare	tank	vdev=$L2 spare=$d/s1" \
    "sysevent.fs.cairn.vdev_attach	tank	vdev=$d/new replacing=$L2" \
    "sysevent.fs.cairn.vdev_remove	tank	vdev=$d/s1 replaced_by=$d/new"; do
    grep -qF "$c" "$LAST_STDOUT" || fail "no event '$c': $(cat "$LAST_STDOUT")"
done
pass "kernel NFS and iSCSI clients: fault, spare in, replace, resilver, spare out; no I/O error, every write verified in the guest"

n=0
while read -r _ sum name; do
    nfs-cat "$(nfs_url "/tank/fs/$name")" >"$T/readback" 2>/dev/null || fail "cannot read $name back"
    [ "$(md5sum <"$T/readback" | cut -d' ' -f1)" = "$sum" ] || fail "$name differs on the host"
    n=$((n + 1))
done < <(grep '^SUM ' "$T/vm.out")
[ "$n" -gt 0 ] || fail "the guest listed no files"
scrub_clean tank
run_ok "$CAIRN" iscsi target destroy -f "$TGT"
run_ok "$CAIRN" pool export tank
check_clean tank "$d"
pass "host: the $n files the kernel client wrote read back byte for byte; scrub and check clean"
