#!/usr/bin/env bash
# NFSv4.2 through the Linux kernel client (a Debian guest under qemu, ../shared/vm):
# mounted with vers=4.2,
#  - `fallocate -p` punches 8 MiB of random bytes: the size stays, the bytes read as
#    zeros, the file's blocks (stat %b, du) and the filesystem's used space (df) fall
#    (polled, bounded: the server gives the space back when its txg syncs);
#  - lseek SEEK_DATA / SEEK_HOLE (perl's sysseek, whence 3 and 4: the guest has no
#    python) find the data and the hole of a sparse file, and ENXIO at its end;
#  - `fallocate -l` (mode 0) extends a file's size without writing data;
#  - copy_file_range(2) (perl's syscall 326) and `cp --reflink=auto` copy 4 MiB
#    with identical bytes;
#  - `cp --reflink=always` of 16 MiB sends CLONE: identical bytes, and the pool's
#    bclonesaved counts at least the 16 MiB;
#  - user.* extended attributes: set, get, list, remove (perl's syscall);
#  - /proc/self/mountstats shows the client really sent ALLOCATE, DEALLOCATE, SEEK,
#    COPY, CLONE and the four xattr operations (none fell back to 4.1 behaviour), and a WRITE
#    byte count for the copies far below what they copied (the data never crossed the
#    wire).
# The guest kernel (Debian 6.1) is built without CONFIG_NFS_V4_2_READ_PLUS, so READ_PLUS
# is tested only through the raw client (test_nfs42_rpc.sh). Exits 77 (skip) only
# when the VM image cannot be built on this machine.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

vm_require

sparse_files "$T/dev" 2G a
daemon_start d1
nfs_ports d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
expect_share /tank/share

GUEST="$T/guest-nfs42.sh"
cat >"$GUEST" <<'EOF'
#!/bin/bash
set -u
fail() { echo "FAIL: $*"; dmesg | tail -n 15; exit 1; }
M=/mnt/nfs
mkdir -p $M
timeout 60 mount -t nfs4 -o vers=4.2,port=${NFS_PORT:-2049},actimeo=0,timeo=100,retrans=2 \
    $SERVER:/tank/share $M || fail mount
grep " $M " /proc/mounts
grep " $M " /proc/mounts | grep -q vers=4.2 || fail "not mounted as 4.2"
cd $M || fail cd
# poll 'SHELL CONDITION': until it holds, evaluated afresh each time, at most 120 s
# (the server gives space back when its txg syncs).
poll() { for _ in $(seq 1 240); do eval "$1" && return 0; sleep 0.5; done; return 1; }
blocks() { stat -c %b "$1"; }
df_used() { df -k --output=used $M | tail -n 1; }

# ---- hole punching ----
dd if=/dev/urandom of=big bs=1M count=8 conv=fsync status=none || fail "dd big"
poll '[ "$(blocks big)" -ge 16384 ]' || fail "big never used 8 MiB: $(blocks big) blocks"
# The file's blocks count its unsynced writes at once (the COMMIT wrote no txg, and a
# client holding a delegation keeps the blocks the COMMIT's reply gave); the
# filesystem's used grows when the txg syncs.
poll '[ "$(df_used)" -ge 8000 ]' || fail "df used never reached 8 MiB: $(df_used) KiB"
used_before=$(df_used)
du -k big
fallocate -p -o 0 -l 8M big || fail "fallocate -p"
[ "$(stat -c %s big)" = 8388608 ] || fail "punch changed the size: $(stat -c %s big)"
cmp -n 8388608 big /dev/zero || fail "the punched range does not read as zeros"
poll '[ "$(blocks big)" -lt 256 ]' || fail "big still has $(blocks big) blocks after the punch"
poll '[ $((used_before - $(df_used))) -ge 7000 ]' ||
    fail "df used $used_before KiB before the punch, $(df_used) KiB after"
du -k big
echo "PASS: punch (blocks $(blocks big), df used $used_before -> $(df_used) KiB)"

# ---- SEEK_DATA / SEEK_HOLE ----
dd if=/dev/urandom of=sp bs=128k count=1 status=none || fail "dd sp"
dd if=/dev/urandom of=sp bs=128k count=1 seek=8 conv=notrunc,fsync status=none || fail "dd sp 2"
got=$(perl -e 'open(F, "<", $ARGV[0]) or die "open: $!";
    my @r = (sysseek(F, 0, 3), sysseek(F, 0, 4), sysseek(F, 131072, 3), sysseek(F, 1048576, 4));
    my $end = sysseek(F, 1179648, 3);
    print join(" ", map { $_ + 0 } @r), " ", (defined $end ? "data" : $!{ENXIO} ? "ENXIO" : "$!"), "\n"' sp)
echo "seek: $got"
[ "$got" = "0 131072 1048576 1179648 ENXIO" ] || fail "SEEK_DATA/SEEK_HOLE: $got"
echo "PASS: seek"

# ---- ALLOCATE ----
fallocate -l 4M alloc || fail "fallocate -l"
[ "$(stat -c %s alloc)" = 4194304 ] || fail "fallocate size $(stat -c %s alloc)"
cmp -n 4194304 alloc /dev/zero || fail "the allocated file does not read as zeros"
echo "PASS: allocate"

# ---- server-side copy ----
# bytes the client sent in WRITE calls (per-op line: ops trans timeouts sent received ...)
wbytes() { awk '$1 == "WRITE:" { print $5; exit }' /proc/self/mountstats; }
dd if=/dev/urandom of=src bs=1M count=4 conv=fsync status=none || fail "dd src"
w0=$(wbytes)
perl -e 'open(I, "<", $ARGV[0]) or die; open(O, ">", $ARGV[1]) or die;
    my $left = -s I;
    while ($left > 0) {
        my $n = syscall(326, fileno(I), 0, fileno(O), 0, $left, 0);
        die "copy_file_range: $!\n" if $n <= 0;
        $left -= $n;
    }' src dst || fail "copy_file_range"
cmp src dst || fail "copy_file_range: the bytes differ"
cp --reflink=auto src dst2 || fail "cp --reflink=auto"
cmp src dst2 || fail "cp --reflink=auto: the bytes differ"
w1=$(wbytes)
echo "WRITE bytes sent during the copies: $((w1 - w0))"
[ $((w1 - w0)) -lt 1048576 ] || fail "the copies sent $((w1 - w0)) bytes of WRITE"
echo "PASS: copy"

# ---- cp --reflink=always: CLONE, the server shares the blocks ----
dd if=/dev/urandom of=big bs=1M count=16 conv=fsync status=none || fail "dd big"
cp --reflink=always big big.clone || fail "cp --reflink=always"
cmp big big.clone || fail "cp --reflink=always: the bytes differ"
echo "PASS: reflink"

# ---- extended attributes (perl's syscall: setxattr 188, getxattr 191, listxattr 194,
# removexattr 197; the guest has no setfattr) ----
echo data > xa || fail "create xa"
got=$(perl -e 'my ($f, $color, $blue, $shape, $round) = (shift, "user.color", "blue",
        "user.shape", "round");   # syscall wants variables, not constants
    syscall(188, $f, $color, $blue, 4, 0) == 0 or die "setxattr: $!\n";
    syscall(188, $f, $shape, $round, 5, 0) == 0 or die "setxattr 2: $!\n";
    my $buf = "\0" x 64;
    my $n = syscall(191, $f, $color, $buf, 64);
    die "getxattr: $!\n" if $n < 0;
    my $l = "\0" x 256;
    my $m = syscall(194, $f, $l, 256);
    die "listxattr: $!\n" if $m < 0;
    syscall(197, $f, $shape) == 0 or die "removexattr: $!\n";
    my $g = syscall(191, $f, $shape, $buf, 64);
    print substr($buf, 0, $n), " ", join(",", sort grep { length } split /\0/, substr($l, 0, $m)),
        " ", ($g < 0 && $!{ENODATA} ? "removed" : "still-there"), "\n"' xa 2>&1)
echo "xattrs: $got"
[ "$got" = "blue user.color,user.shape removed" ] || fail "extended attributes: $got"
echo "PASS: xattrs"

grep -E "^[[:space:]]*(ALLOCATE|DEALLOCATE|SEEK|COPY|CLONE|READ_PLUS|WRITE|[A-Z]*XATTRS?):" /proc/self/mountstats
for op in ALLOCATE DEALLOCATE SEEK COPY CLONE SETXATTR GETXATTR LISTXATTRS REMOVEXATTR; do
    n=$(awk -v op="$op:" '$1 == op { print $2; exit }' /proc/self/mountstats)
    [ "${n:-0}" -gt 0 ] || fail "the client sent no $op"
done
echo "PASS: 4.2 operations sent"
cd /
umount $M || fail umount
echo "PASS: NFSv4.2 guest"
EOF

rc=0
VM_NFS_PORT=$NFS_PORT VM_ISCSI_PORT=0 "$VM_DIR/run-vm.sh" "$GUEST" >"$T/vm.out" 2>&1 || rc=$?
cat "$T/vm.out"
[ "$rc" -eq 0 ] || fail "the guest failed (rc $rc)"
for what in punch seek allocate copy reflink xattrs "4.2 operations sent" "NFSv4.2 guest"; do
    grep -q "PASS: $what" "$T/vm.out" || fail "no pass line for $what"
done
# The clone of the 16 MiB file (and the copies of 4 MiB, by clones) share blocks.
saved=$("$CAIRN" pool get -H -p bclonesaved tank | cut -f3)
[ "$saved" -ge $((16 << 20)) ] || fail "bclonesaved $saved after cp --reflink=always of 16 MiB"
pass "Linux kernel client, vers=4.2: fallocate -p frees space, SEEK_DATA/HOLE, fallocate -l, copy_file_range and cp --reflink=auto copy on the server, cp --reflink=always clones (bclonesaved $saved), user xattrs"
daemon_stop
