#!/usr/bin/env bash
# NFSv3 (nolock) through the Linux kernel's own client: a Debian guest under qemu
# (../shared/vm) mounts Cairn's share with the NFS and MOUNT ports given and 1 MiB
# rsize/wsize (the shared guest-nfs3.sh: dd with fsync, remount so nothing comes from
# the client cache, read back, md5 compare, ls, unmount); then mounts again with no
# ports at all, so mount.nfs and the kernel find MOUNT and NFS through Cairn's built-in
# portmapper, and runs everyday operations (directories, rename, links, chmod/chown/
# utimes/truncate, a FIFO, offsets past 4 GiB, a user without permission, O_EXCL, rm -r,
# a directory large enough to need several READDIRPLUS calls). It leaves files behind
# that the host then reads back with libnfs, so what the kernel wrote is what the server
# stored. Exits 77 (skip) only when the VM image cannot be built.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

vm_require

sparse_files "$T/dev" 4G a
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
expect_share /tank/share

MANY=300
GUEST="$T/guest-nfs3-all.sh"
{
    echo '#!/bin/bash'
    echo 'bash -s <<'"'"'INNER'"'"' || exit 1'
    cat "$VM_DIR/guest-nfs3.sh"
    echo 'INNER'
    echo "MANY=$MANY"
    cat <<'OPS'
set -u
fail() { echo "FAIL: $*"; dmesg | tail -n 15; exit 1; }
M=/mnt/nfs3
mkdir -p $M
# No port, no mountport: the ports come from the portmapper on $SERVER:111, and
# the host forwards the same port numbers, so whatever it answers is reachable.
timeout 60 mount -t nfs -o vers=3,proto=tcp,mountproto=tcp,nolock,timeo=100,retrans=2 \
    $SERVER:/tank/share $M || fail "mount through the portmapper"
grep " $M " /proc/mounts
grep " $M " /proc/mounts | grep -q 'vers=3' || fail "not an NFSv3 mount"
cd $M || fail cd
mkdir -p d1/d2 || fail mkdir
echo hello > d1/f || fail write
[ "$(cat d1/f)" = hello ] || fail read
mv d1/f d1/d2/g || fail mv
[ -e d1/f ] && fail "rename left the source"
ln -s d2/g d1/sym || fail symlink
[ "$(readlink d1/sym)" = d2/g ] || fail "readlink $(readlink d1/sym)"
[ "$(cat d1/sym)" = hello ] || fail "read via symlink"
ln d1/d2/g d1/hard || fail hardlink
[ "$(stat -c %h d1/hard)" = 2 ] || fail "nlink $(stat -c %h d1/hard)"
[ "$(stat -c %i d1/hard)" = "$(stat -c %i d1/d2/g)" ] || fail "hard link has another inode"
chmod 640 d1/hard || fail chmod
[ "$(stat -c %a d1/d2/g)" = 640 ] || fail "mode $(stat -c %a d1/d2/g)"
chown 1000:1000 d1/hard || fail chown
[ "$(stat -c %u:%g d1/hard)" = 1000:1000 ] || fail "owner $(stat -c %u:%g d1/hard)"
touch -d '2001-02-03 04:05:06' d1/hard || fail touch
[ "$(stat -c %Y d1/hard)" = "$(date -d '2001-02-03 04:05:06' +%s)" ] || fail "mtime $(stat -c %Y d1/hard)"
truncate -s 1000000 d1/hard || fail truncate
[ "$(stat -c %s d1/hard)" = 1000000 ] || fail "size $(stat -c %s d1/hard)"
[ "$(head -c 5 d1/hard)" = hello ] || fail "truncate lost the head"
[ "$(tail -c 10 d1/hard | tr -d '\0' | wc -c)" = 0 ] || fail "the extension is not zeros"
mkfifo d1/fifo || fail mkfifo
[ -p d1/fifo ] || fail "not a fifo"
ls -la d1 d1/d2 || fail ls
rmdir d1 2>/dev/null && fail "rmdir of a non-empty directory"
su -s /bin/sh nobody -c "echo x > $M/d1/nope" 2>/dev/null && fail "nobody wrote into a root dir"
rm -rf d1 || fail "rm -rf"
[ -e d1 ] && fail "d1 still there"
# Offsets past 4 GiB (64-bit offset3/count3 through the kernel), and a rename that
# replaces an existing file.
printf tail | dd of=huge bs=1 seek=$((5 << 30)) conv=notrunc,fsync status=none || fail "write at 5 GiB"
[ "$(stat -c %s huge)" = $(((5 << 30) + 4)) ] || fail "huge size $(stat -c %s huge)"
[ "$(tail -c 4 huge)" = tail ] || fail "read at 5 GiB"
[ "$(dd if=huge bs=4k skip=$((1 << 20)) count=1 status=none | tr -d '\0' | wc -c)" = 0 ] || fail "hole not zero"
echo new > r1; echo old > r2
mv r1 r2 || fail "rename over a file"
[ "$(cat r2)" = new ] && [ ! -e r1 ] || fail "rename over a file: $(cat r2)"
rm -f huge r2
mkdir -p priv && chmod 700 priv || fail "mkdir priv"
su -s /bin/sh nobody -c "ls $M/priv" >/dev/null 2>&1 && fail "nobody listed a 0700 dir"
rmdir priv || fail "rmdir priv"
# Exclusive create (O_EXCL: CREATE EXCLUSIVE with a verifier) must refuse an existing name.
echo x > excl || fail "create"
( set -o noclobber; echo y > excl ) 2>/dev/null && fail "O_EXCL create of an existing file"
rm -f excl
# Kept for the host: a file with known content and a large directory.
mkdir -p keep/many || fail "mkdir keep"
dd if=/dev/urandom of=keep-big.bin bs=64k count=40 conv=fsync status=none || fail "dd keep"
echo "KEEP md5 $(md5sum <keep-big.bin | cut -d' ' -f1)"
echo "written by the kernel client" > keep-small.txt || fail "small"
for i in $(seq 1 $MANY); do : > "keep/many/a-file-with-a-longish-name-$i"; done || fail "many files"
n=$(ls keep/many | wc -l)
[ "$n" = "$MANY" ] || fail "ls keep/many shows $n files, want $MANY"
n=$(ls -l keep/many | grep -c longish)
[ "$n" = "$MANY" ] || fail "ls -l keep/many shows $n files, want $MANY"
df -h $M | tail -1
cd /
umount $M || fail umount
# After a remount, what the kernel reads comes from the server, not its cache.
timeout 60 mount -t nfs -o vers=3,proto=tcp,mountproto=tcp,nolock,timeo=100,retrans=2 \
    $SERVER:/tank/share $M || fail "remount"
echo "KEEP md5 again $(md5sum <$M/keep-big.bin | cut -d' ' -f1)"
[ "$(ls $M/keep/many | wc -l)" = "$MANY" ] || fail "many after remount"
umount $M || fail "umount 2"
echo "PASS: ops"
OPS
} >"$GUEST"

rc=0
VM_NFS_PORT=$NFS_PORT VM_MOUNTD_PORT=$MOUNT_PORT VM_RPCBIND_PORT=$PMAP_PORT VM_ISCSI_PORT=0 \
    VM_FWD="$NFS_PORT:$NFS_PORT $MOUNT_PORT:$MOUNT_PORT" \
    GUEST_NFS_EXPORT=/tank/share GUEST_FILE_MB=${GUEST_FILE_MB:-16} \
    GUEST_NFS_OPTS=rsize=1048576,wsize=1048576 \
    "$VM_DIR/run-vm.sh" "$GUEST" >"$T/vm.out" 2>&1 || rc=$?
cat "$T/vm.out"
[ "$rc" -eq 0 ] || fail "the guest failed (rc $rc)"
grep -q "PASS: NFSv3 " "$T/vm.out" || fail "no NFSv3 pass line"
grep -Eq "^mounted in .*vers=3,.*nolock" "$T/vm.out" || fail "the mount was not NFSv3 with nolock"
# FSINFO's rtmax/wtmax of 1 MiB let the kernel move the dd data in 1 MiB READs and WRITEs.
grep -Eq "^mounted in .*rsize=1048576,wsize=1048576" "$T/vm.out" || fail "the mount did not get 1 MiB rsize/wsize"
grep -q "PASS: ops" "$T/vm.out" || fail "everyday operations failed"
# The second mount asked the portmapper: the kernel used the ports it answered.
grep -E "/mnt/nfs3 nfs .*[,]port=$NFS_PORT,.*[,]mountport=$MOUNT_PORT," "$T/vm.out" >/dev/null ||
    fail "the portmapper mount did not use cairnd's NFS and MOUNT ports"
pass "Linux kernel client: NFSv3 nolock write, remount, read back, md5 match; mount through the portmapper; everyday operations"

# The host reads what the guest left, through libnfs over NFSv3.
want=$(sed -n 's/^KEEP md5 \([0-9a-f]*\)$/\1/p' "$T/vm.out")
again=$(sed -n 's/^KEEP md5 again \([0-9a-f]*\)$/\1/p' "$T/vm.out")
[ -n "$want" ] || fail "the guest printed no md5 of keep-big.bin"
[ "$want" = "$again" ] || fail "the guest read back $again after a remount, wrote $want"
nfs-cat "$(nfs_url /tank/share/keep-big.bin)" >"$T/big.bin" 2>"$LAST_STDERR" ||
    fail "nfs-cat big.bin: $(cat "$LAST_STDERR")"
[ "$(stat -c %s "$T/big.bin")" = $((40 * 65536)) ] || fail "big.bin has $(stat -c %s "$T/big.bin") bytes"
got=$(md5sum <"$T/big.bin" | cut -d' ' -f1)
[ "$got" = "$want" ] || fail "libnfs reads md5 $got, the guest wrote $want"
run_ok nfs-cat "$(nfs_url /tank/share/keep-small.txt)"
[ "$(cat "$LAST_STDOUT")" = "written by the kernel client" ] || fail "small.txt: $(cat "$LAST_STDOUT")"
# (libnfs mounts a URL's directory part, and only the share itself is exported: the
# kept files sit at its root and the large directory is listed recursively.)
run_ok nfs-ls -R "$(nfs_url /tank/share)"
n=$(grep -c longish "$LAST_STDOUT" || true)
[ "$n" = "$MANY" ] || fail "nfs-ls keep/many shows $n files, want $MANY"
run_ok nfs-ls "$(nfs_url /tank/share)"
grep -q 'keep-small.txt' "$LAST_STDOUT" || fail "nfs-ls lacks keep-small.txt: $(cat "$LAST_STDOUT")"
if grep -q vmtest- "$LAST_STDOUT"; then fail "the guest's removed file is still listed"; fi
if grep -Eq ' d1$' "$LAST_STDOUT"; then fail "the guest's removed directory is still listed"; fi
pass "host side: libnfs reads the kernel client's files byte for byte and lists all $MANY names"
daemon_stop
