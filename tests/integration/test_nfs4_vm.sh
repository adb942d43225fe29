#!/usr/bin/env bash
# NFSv4.1 and 4.2 through the Linux kernel's own client: a Debian guest under qemu
# (../shared/vm) mounts Cairn's share, writes a file with dd (fsync), remounts so
# nothing comes from its cache, reads it back and compares checksums, lists the
# directory and unmounts, once per minor version (4.2's own operations: test_nfs42_vm.sh);
# then everyday file operations over 4.1. Exits 77 (skip) only when the VM image cannot be
# built on this machine.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

vm_require

sparse_files "$T/dev" 4G a
daemon_start d1
nfs_ports d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
expect_share /tank/share

# One boot for both versions: the guest runs the shared script once per version.
GUEST="$T/guest-nfs4-versions.sh"
{
    echo '#!/bin/bash'
    echo 'run_one() { GUEST_NFS_VERS=$1 bash -s <<'"'"'INNER'"'"
    cat "$VM_DIR/guest-nfs4.sh"
    echo 'INNER'
    echo '}'
    echo 'run_one 4.1 || exit 1'
    echo 'run_one 4.2 || exit 1'
    # Everyday operations through the kernel client (4.1): directories, rename,
    # symbolic and hard links, chmod/chown/utimes/truncate, flock between two open
    # files, a FIFO, a user without permission, rm -r, many small files.
    cat <<'OPS'
set -u
fail() { echo "FAIL: $*"; dmesg | tail -n 15; exit 1; }
M=/mnt/nfs
mkdir -p $M
timeout 60 mount -t nfs4 -o vers=4.1,port=${NFS_PORT:-2049},timeo=100,retrans=2 $SERVER:/tank/share $M || fail mount
cd $M || fail cd
mkdir -p d1/d2 || fail mkdir
echo hello > d1/f || fail write
[ "$(cat d1/f)" = hello ] || fail read
mv d1/f d1/d2/g || fail mv
ln -s d2/g d1/sym || fail symlink
[ "$(cat d1/sym)" = hello ] || fail "read via symlink"
ln d1/d2/g d1/hard || fail hardlink
[ "$(stat -c %h d1/hard)" = 2 ] || fail "nlink $(stat -c %h d1/hard)"
chmod 600 d1/hard || fail chmod
[ "$(stat -c %a d1/d2/g)" = 600 ] || fail "mode $(stat -c %a d1/d2/g)"
chown 1000:1000 d1/hard || fail chown
[ "$(stat -c %u:%g d1/hard)" = 1000:1000 ] || fail "owner $(stat -c %u:%g d1/hard)"
touch -d '2001-02-03 04:05:06' d1/hard || fail touch
[ "$(stat -c %Y d1/hard)" = "$(date -d '2001-02-03 04:05:06' +%s)" ] || fail "mtime"
truncate -s 1000000 d1/hard || fail truncate
[ "$(stat -c %s d1/hard)" = 1000000 ] || fail size
flock -n d1/hard -c 'flock -n d1/hard true' && fail "second flock got the lock"
flock -n d1/hard true || fail "flock"
mkfifo d1/fifo || fail mkfifo
[ -p d1/fifo ] || fail "not a fifo"
ls -la d1 d1/d2 || fail ls
su -s /bin/sh nobody -c "echo x > $M/d1/nope" 2>/dev/null && fail "nobody wrote into a root dir"
rm -rf d1 || fail "rm -rf"
[ -e d1 ] && fail "d1 still there"
df -h $M | tail -1
for i in $(seq 1 50); do echo $i > f$i; done; rm -f f* || fail "many files"
cd /
umount $M || fail umount
echo "PASS: ops"
OPS
} >"$GUEST"

rc=0
VM_NFS_PORT=$NFS_PORT VM_ISCSI_PORT=0 GUEST_NFS_EXPORT=/tank/share GUEST_FILE_MB=${GUEST_FILE_MB:-16} \
    "$VM_DIR/run-vm.sh" "$GUEST" >"$T/vm.out" 2>&1 || rc=$?
cat "$T/vm.out"
[ "$rc" -eq 0 ] || fail "the guest failed (rc $rc)"
grep -q "PASS: NFSv4.1 " "$T/vm.out" || fail "no NFSv4.1 pass line"
grep -q "PASS: NFSv4.2 " "$T/vm.out" || fail "no NFSv4.2 pass line"
grep -q "vers=4.1" "$T/vm.out" || fail "the 4.1 mount was not 4.1"
grep -q "vers=4.2" "$T/vm.out" || fail "the 4.2 mount was not 4.2"
grep -q "PASS: ops" "$T/vm.out" || fail "everyday operations failed"
pass "Linux kernel client: NFSv4.1 and 4.2 write, remount, read back, md5 match; everyday operations"

# The share still serves after the guest went away (its state is gone cleanly).
run_ok nfs-ls "nfs://127.0.0.1/tank/share?nfsport=$NFS_PORT&version=4"
daemon_stop
