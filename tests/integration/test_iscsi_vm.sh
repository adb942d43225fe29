#!/usr/bin/env bash
# The Linux kernel's iSCSI initiator (open-iscsi, iscsi_tcp) against Cairn's target, as
# a host uses it: a Debian guest under qemu (../shared/vm) discovers the target, logs in,
# checks what the SCSI disk driver made of the LUN (size, thin provisioning, write
# cache and FUA, request size, no sense errors), writes and verifies the raw disk with
# 32 commands in flight (fio), makes an ext4 file system, writes a big file and a tree of
# small ones, deletes a file and runs fstrim (UNMAP), unmounts, runs e2fsck, logs out;
# then logs in again on a new session with the other corner of negotiation (CRC32C
# header and data digests, InitialR2T=Yes, no immediate data, 8 KiB PDUs), fscks,
# checks every file, writes and reads back more, and logs out.
# From the host afterwards: the volume's space shows the data and the trim; after
# kill -9 and restart, the whole LUN read through libiscsi is a clean ext4 file system
# (host e2fsck) holding the guest's files byte for byte (debugfs). Exits 77 (skip) only
# when the VM image cannot be built on this machine.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

vm_require
E2FSCK=$(command -v e2fsck || echo /usr/sbin/e2fsck)
DEBUGFS=$(command -v debugfs || echo /usr/sbin/debugfs)

CLIENT="$CAIRN_BIN/iscsi_client"
TGT=iqn.2026-11.org.cairn.test:vm
VOL_BYTES=$((256 * 1024 * 1024))
KEEP_MB=8   # stays on the file system
TRASH_MB=24 # written, deleted, trimmed
PORT=$(cairn_random_port)
P=127.0.0.1:$PORT

sparse_files "$T/dev" 2G a
daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -s -V $VOL_BYTES tank/vol
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" tank/vol
run_ok "$CAIRN" get -Hp used tank/vol
[ "$(cut -f3 "$LAST_STDOUT")" -lt $((1024 * 1024)) ] || fail "a new thin volume uses $(cat "$LAST_STDOUT")"

GUEST="$T/guest-iscsi-ext4.sh"
cat >"$GUEST" <<'GUEST_SCRIPT'
#!/bin/bash
set -u
PORTAL=$SERVER:${ISCSI_PORT:-3260}
IQN=$GUEST_ISCSI_IQN
M=/mnt/iscsi
LOGGED_IN=0
# What the kernel says when a target answers something it does not like.
BAD='Sense Key|I/O error|EXT4-fs error|conn error|timing out command|Asking for cache data failed|abort|reset|Medium access timeout|rejected|unsupported|Unaligned'
kmsgs() { dmesg | grep -iE 'scsi|sd[a-z]|ext4|iscsi|connection|blk_|I/O'; }
fail() {
	echo "FAIL: $*"
	kmsgs | tail -n 40
	if [ "$LOGGED_IN" = 1 ]; then
		umount $M 2>/dev/null
		timeout 30 iscsiadm -m node -T "$IQN" -p "$PORTAL" --logout
	fi
	exit 1
}
login() {
	iscsi_login
	d=$(basename "$dev")
}
logout() {
	timeout 60 iscsiadm -m node -T "$IQN" -p "$PORTAL" --logout || fail "logout (rc $?)"
	LOGGED_IN=0
	iscsiadm -m session >/dev/null 2>&1 && fail "a session is left after logout"
}
fsck_clean() {
	e2fsck -f -n "$dev" >/tmp/fsck.out 2>&1 || { cat /tmp/fsck.out; fail "e2fsck $1 (rc $?)"; }
	echo "e2fsck $1: $(tail -n 1 /tmp/fsck.out)"
}

modprobe -a iscsi_tcp sd_mod || fail "modprobe iscsi_tcp sd_mod"
iscsid || fail "iscsid did not start"
disc=$(timeout 60 iscsiadm -m discovery -t st -p "$PORTAL") || fail "discovery (rc $?): $disc"
echo "discovery: $disc"
echo "$disc" | grep -q " $IQN\$" || fail "discovery does not list $IQN"
# Discovery reports the portal the target listens on (on the host), which the guest
# cannot reach; the node record is made for the forwarded portal.
echo "$disc" | while read -r p iqn; do
	iscsiadm -m node -T "$iqn" -p "${p%,*}" -o delete >/dev/null 2>&1
done
iscsiadm -m node -T "$IQN" -p "$PORTAL" -o new >/dev/null || fail "node -o new"

echo "== session 1: login"
login
size=$(blockdev --getsize64 "$dev")
echo "disk $dev: $size bytes"
[ "$size" = "$GUEST_VOL_BYTES" ] || fail "disk size $size, volume is $GUEST_VOL_BYTES"
kmsgs | grep -E "\[$d\]" | sed 's/^/kernel: /'
# The disk driver's view: thin (UNMAP via READ CAPACITY 16 LBPME and VPD B0/B2), a
# write-back cache it flushes (SYNCHRONIZE CACHE) and FUA.
sd=$(echo /sys/block/$d/device/scsi_disk/*)
echo "provisioning_mode=$(cat $sd/provisioning_mode) write_cache=$(cat /sys/block/$d/queue/write_cache)" \
	"fua=$(cat /sys/block/$d/queue/fua) discard_max=$(cat /sys/block/$d/queue/discard_max_bytes)" \
	"max_sectors_kb=$(cat /sys/block/$d/queue/max_sectors_kb) opt_io=$(cat /sys/block/$d/queue/optimal_io_size)"
[ "$(cat $sd/provisioning_mode)" = unmap ] || fail "provisioning_mode $(cat $sd/provisioning_mode), not unmap"
[ "$(cat /sys/block/$d/queue/write_cache)" = "write back" ] || fail "write cache not reported"
[ "$(cat /sys/block/$d/queue/fua)" = 1 ] || fail "FUA not reported"
[ "$(cat /sys/block/$d/queue/discard_max_bytes)" -gt 0 ] || fail "no discard"
# sd caps each request at VPD B0's OPTIMAL TRANSFER LENGTH: one volume block would crawl
[ "$(cat /sys/block/$d/queue/max_sectors_kb)" -ge 512 ] ||
	fail "requests capped at $(cat /sys/block/$d/queue/max_sectors_kb) KiB"

# Many commands in flight on the raw disk (CmdSN window, tags, interleaved R2T and
# Data-In), mixed sizes, every block read back and checked by fio.
fio --name=qd32 --filename="$dev" --direct=1 --ioengine=libaio --iodepth=32 --rw=randwrite \
	--bsrange=4k-128k --size=24m --verify=crc32c --verify_fatal=1 --do_verify=1 \
	--randrepeat=0 >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio write+verify at queue depth 32"; }
grep -E '^ *(read|write): IOPS=' /tmp/fio.out | sed 's/^ */fio /'
mkfs.ext4 -F -q "$dev" || fail "mkfs.ext4"
mkdir -p $M
mount "$dev" $M || fail "mount"
dd if=/dev/urandom of=$M/keep.bin bs=1M count="$GUEST_KEEP_MB" conv=fsync status=none || fail "write keep.bin"
dd if=/dev/urandom of=$M/trash.bin bs=1M count="$GUEST_TRASH_MB" conv=fsync status=none || fail "write trash.bin"
mkdir -p $M/tree || fail mkdir
cp -a /etc $M/tree/ 2>/dev/null
for i in $(seq 1 100); do echo "small file $i" >$M/tree/f$i; done
mkdir -p $M/tree/a/b/c && ln -s ../../f1 $M/tree/a/b/link && ln $M/tree/f2 $M/tree/a/hard || fail "links"
sync || fail sync
(cd $M && find . -type f ! -name trash.bin -print0 | sort -z | xargs -0 md5sum) >/tmp/sums || fail "md5sum"
echo "files: $(wc -l </tmp/sums)"
echo "KEEP_MD5 $(md5sum <$M/keep.bin | cut -d' ' -f1)"
rm $M/trash.bin || fail rm
sync
trimmed=$(fstrim -v $M) || fail "fstrim: $trimmed"
echo "$trimmed"
df -k $M | tail -n 1
umount $M || fail "umount"
fsck_clean "after session 1"
logout

echo "== session 2: CRC32C digests, R2T for every write, small PDUs"
# The other corner of login negotiation from session 1's defaults (no digests,
# immediate and unsolicited data, 256 KiB PDUs).
for kv in node.conn[0].iscsi.HeaderDigest=CRC32C node.conn[0].iscsi.DataDigest=CRC32C \
	node.session.iscsi.InitialR2T=Yes node.session.iscsi.ImmediateData=No \
	node.conn[0].iscsi.MaxRecvDataSegmentLength=8192 node.session.iscsi.MaxBurstLength=65536 \
	node.session.iscsi.FirstBurstLength=16384; do
	iscsiadm -m node -T "$IQN" -p "$PORTAL" -o update -n "${kv%%=*}" -v "${kv#*=}" ||
		fail "node update $kv"
done
echo 3 >/proc/sys/vm/drop_caches
login
iscsiadm -m session -P 2 >/tmp/s.out
grep -E 'Digest|InitialR2T|ImmediateData|Burst|DataSegmentLength' /tmp/s.out | sed 's/^[[:space:]]*/  /'
for want in 'HeaderDigest: CRC32C' 'DataDigest: CRC32C' 'InitialR2T: Yes' 'ImmediateData: No' \
	'MaxBurstLength: 65536' 'FirstBurstLength: 16384'; do
	grep -q "$want" /tmp/s.out || fail "session 2 did not negotiate $want"
done
fsck_clean "at session 2 login"
mount "$dev" $M || fail "mount in session 2"
(cd $M && md5sum --quiet -c /tmp/sums) || fail "files differ in session 2"
[ -e $M/trash.bin ] && fail "trash.bin came back"
[ "$(cat $M/tree/a/b/link)" = "small file 1" ] || fail "symlink"
[ "$(stat -c %h $M/tree/f2)" = 2 ] || fail "hard link count"
echo "written in session 2" >$M/second.txt || fail "write in session 2"
dd if=/dev/urandom of=/tmp/second.bin bs=1M count=4 status=none || fail urandom
second=$(md5sum </tmp/second.bin | cut -d' ' -f1)
echo "SECOND_MD5 $second"
dd if=/tmp/second.bin of=$M/second.bin bs=1M conv=fsync status=none || fail "write second.bin"
umount $M || fail "umount in session 2"
echo 3 >/proc/sys/vm/drop_caches
mount "$dev" $M || fail "remount in session 2"
[ "$(md5sum <$M/second.bin | cut -d' ' -f1)" = "$second" ] || fail "second.bin read back differs"
umount $M || fail "umount in session 2"
fsck_clean "after session 2"
logout
iscsiadm -m node -T "$IQN" -p "$PORTAL" -o delete

kmsgs | grep -v "\[$d\]" | tail -n 40 | sed 's/^/kernel: /'
bad=$(kmsgs | grep -iE "$BAD")
[ -z "$bad" ] || fail "the kernel complained: $bad"
echo "PASS: kernel iSCSI initiator: ext4, files, fstrim, e2fsck, logout and re-login"
GUEST_SCRIPT
sed -i "1r $CAIRN_SRC/tests/integration/vm_guest_iscsi.sh" "$GUEST"

rc=0
VM_ISCSI_PORT=$PORT VM_NFS_PORT=0 GUEST_ISCSI_IQN=$TGT GUEST_VOL_BYTES=$VOL_BYTES \
    GUEST_KEEP_MB=$KEEP_MB GUEST_TRASH_MB=$TRASH_MB \
    "$VM_DIR/run-vm.sh" "$GUEST" >"$T/vm.out" 2>&1 || rc=$?
cat "$T/vm.out"
[ "$rc" -eq 0 ] || fail "the guest failed (rc $rc)"
grep -q "^PASS: kernel iSCSI initiator" "$T/vm.out" || fail "no pass line from the guest"
KEEP_MD5=$(sed -n 's/^KEEP_MD5 //p' "$T/vm.out")
[ -n "$KEEP_MD5" ] || fail "the guest reported no checksum"
# The target saw nothing it had to refuse or complain about.
grep -a -E ' (iscsi|scsi): ' "$T/d1.daemon.log" | grep -a -v ' INFO ' >"$T/target-complaints" || true
[ ! -s "$T/target-complaints" ] || fail "the target logged: $(head -n 20 "$T/target-complaints")"
pass "Linux kernel initiator: discovery, login, ext4, files, fstrim, e2fsck, logout, re-login"

# The data is in the volume, and the trimmed file's space went back to the pool.
run_ok "$CAIRN" get -Hp used tank/vol
USED=$(cut -f3 "$LAST_STDOUT")
echo "volume used: $USED bytes"
[ "$USED" -ge $((KEEP_MB * 1024 * 1024)) ] || fail "volume uses $USED bytes, the guest kept $KEEP_MB MiB"
[ "$USED" -lt $(((KEEP_MB + TRASH_MB / 2) * 1024 * 1024)) ] ||
    fail "volume uses $USED bytes: the trimmed $TRASH_MB MiB were not freed"
pass "volume space: kept data counted, trimmed data freed"

# What the guest flushed survives a crash: kill -9, restart, read the whole LUN.
daemon_kill9
daemon_start d1 --iscsi-listen "$P"
"$CLIENT" dump "$P" "$TGT" "$T/lun.img" || fail "reading the LUN through libiscsi"
"$E2FSCK" -f -n "$T/lun.img" >"$T/fsck.out" 2>&1 || fail "host e2fsck of the LUN: $(cat "$T/fsck.out")"
"$DEBUGFS" -R "dump /keep.bin $T/keep.bin" "$T/lun.img" >/dev/null 2>&1
[ "$(md5sum <"$T/keep.bin" | cut -d' ' -f1)" = "$KEEP_MD5" ] || fail "keep.bin on the LUN differs"
"$DEBUGFS" -R "cat /second.txt" "$T/lun.img" 2>/dev/null >"$T/second.txt"
[ "$(cat "$T/second.txt")" = "written in session 2" ] || fail "second.txt: $(cat "$T/second.txt")"
SECOND_MD5=$(sed -n 's/^SECOND_MD5 //p' "$T/vm.out")
"$DEBUGFS" -R "dump /second.bin $T/second.bin" "$T/lun.img" >/dev/null 2>&1
[ "$(md5sum <"$T/second.bin" | cut -d' ' -f1)" = "$SECOND_MD5" ] || fail "second.bin on the LUN differs"
"$DEBUGFS" -R "ls /" "$T/lun.img" 2>/dev/null | grep -q trash.bin && fail "trash.bin on the LUN"
pass "after kill -9 and restart: clean ext4 on the LUN (host e2fsck), files byte for byte"
daemon_stop
