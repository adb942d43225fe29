#!/usr/bin/env bash
# NFSv3 *with* locking through the Linux kernel's own client (../shared/vm guest; no
# `nolock`): the guest runs rpcbind and statd, mounts through Cairn's portmapper, and
# its lockd talks NLM to cairnd. Two processes in the guest contend with fcntl byte
# ranges (a conflicting F_SETLK fails, a disjoint one succeeds, F_SETLKW waits and gets
# the lock once the holder exits) and with flock (which the NFS client maps to a
# whole-file lock); a second mount of the same share sees the first one's locks; the
# host's raw NLM client sees the guest's lock and gets it once the guest lets go.
# (The guest cannot be reached from the host - qemu's restricted user network - so
# the server's NLM_GRANTED callbacks do not arrive: the kernel re-sends a blocked
# LOCK on its own every 30 s, which is what F_SETLKW waits for here; and SM_NOTIFY
# cannot reach the guest's statd, so reclaim after a restart is covered by
# test_nfs3_nlm.sh's raw client instead.) Exits 77 only when the VM image cannot be built.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

vm_require

sparse_files "$T/dev" 2G a
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
expect_share /tank/share
URL=$(nfs_url /tank/share)
nfs_client "$URL" put locked.dat "lock me"

GUEST="$T/guest-nfs3-lock.sh"
cat >"$GUEST" <<'GUESTEOF'
#!/bin/bash
set -u
fail() { echo "FAIL: $*"; dmesg | tail -n 20; exit 1; }
# fcntl F_SETLK/F_SETLKW from perl (perl-base is in the image): struct flock on x86_64
# is { short type; short whence; off_t start; off_t len; pid_t pid; }.
cat >/tmp/lk.pl <<'PERL'
use Fcntl;
my ($file, $cmd, $type, $start, $len, $hold) = @ARGV;
open(my $f, "+<", $file) or die "open $file: $!";
my $t = $type eq "w" ? F_WRLCK : F_RDLCK;
my $c = $cmd eq "wait" ? F_SETLKW : F_SETLK;
fcntl($f, $c, pack("s s x4 q q i x4", $t, 0, $start, $len, 0)) or exit 1;
print "locked\n";
$| = 1;
sleep $hold if $hold;
exit 0;
PERL
lk() { perl /tmp/lk.pl "$@"; }
rpcbind -w 2>/dev/null || rpcbind || fail "rpcbind"
rpc.statd --no-notify || fail "rpc.statd"
M=/mnt/a; M2=/mnt/b
mkdir -p $M $M2
timeout 60 mount -t nfs -o vers=3,proto=tcp,mountproto=tcp,timeo=100,retrans=2 \
    $SERVER:/tank/share $M || fail "mount with locking"
grep " $M " /proc/mounts
grep " $M " /proc/mounts | grep -q nolock && fail "mounted nolock"
timeout 60 mount -t nfs -o vers=3,proto=tcp,mountproto=tcp,timeo=100,retrans=2,nosharecache,ac \
    $SERVER:/tank/share $M2 || fail "second mount"
F=$M/locked.dat
# fcntl between two processes.
lk $F now w 0 100 25 >/tmp/h1 &
H=$!
for i in $(seq 1 200); do grep -q locked /tmp/h1 && break; sleep 0.1; done
grep -q locked /tmp/h1 || fail "the holder got no lock"
echo "HOLDING"
lk $F now w 50 10 0 && fail "F_SETLK [50,60) under another process's write lock succeeded"
lk $F now r 99 1 0 && fail "F_SETLK read of byte 99 under a write lock succeeded"
lk $F now w 100 10 0 || fail "F_SETLK of the free [100,110) failed"
lk $M2/locked.dat now w 10 1 0 && fail "the second mount's F_SETLK ignored the first's lock"
echo "PASS: fcntl conflicts"
# The host checks the lock (its raw NLM client) and waits for our signal file.
touch $M/guest-holds
for i in $(seq 1 600); do [ -e $M/host-checked ] && break; sleep 0.1; done
[ -e $M/host-checked ] || fail "the host never checked"
t0=$(date +%s)
lk $F wait w 0 1 0 || fail "F_SETLKW of byte 0"
echo "PASS: F_SETLKW got the lock after $(( $(date +%s) - t0 )) s"
wait $H
# flock: whole file.
flock $M/locked.dat sh -c 'echo flocked >/tmp/h2; sleep 8' &
H=$!
for i in $(seq 1 200); do grep -q flocked /tmp/h2 2>/dev/null && break; sleep 0.1; done
grep -q flocked /tmp/h2 || fail "the flock holder got no lock"
flock -n $M2/locked.dat true && fail "flock -n beside a held flock succeeded"
lk $F now r 5000 1 0 && fail "fcntl read lock inside a flock'ed file succeeded"
wait $H   # (killing flock(1) would leave its child holding the descriptor)
flock -n $M/locked.dat true || fail "flock -n after the holder left failed"
echo "PASS: flock"
rm -f $M/guest-holds $M/host-checked
umount $M2; umount $M || fail umount
echo "PASS: all"
GUESTEOF

VM_NFS_PORT=$NFS_PORT VM_MOUNTD_PORT=$MOUNT_PORT VM_RPCBIND_PORT=$PMAP_PORT VM_ISCSI_PORT=0 \
    VM_FWD="$NFS_PORT:$NFS_PORT $MOUNT_PORT:$MOUNT_PORT" \
    "$VM_DIR/run-vm.sh" "$GUEST" >"$T/vm.out" 2>&1 &
VMPID=$!
# While the guest holds [0,100): the host's NLM client sees it and gets it later.
for i in $(seq 1 3000); do
    grep -q HOLDING "$T/vm.out" && break
    kill -0 $VMPID 2>/dev/null || break
    sleep 0.2
done
grep -q HOLDING "$T/vm.out" || { cat "$T/vm.out"; fail "the guest never held its lock"; }
python3 - "$NFS_PORT" "$MOUNT_PORT" <<'PY' || { cat "$T/vm.out"; fail "host check of the guest's lock"; }
import os, sys
sys.path.insert(0, os.path.join(os.environ["CAIRN_SRC"], "tests/integration"))
from nfs_rpc import Conn, check, lookup, mount
from nlm_rpc import Owner, DENIED
root = mount("127.0.0.1", int(sys.argv[2]), "/tank/share")
c = Conn("127.0.0.1", int(sys.argv[1]))
st, fh = lookup(c, root, "locked.dat")
check(st == 0, "lookup")
st, h = Owner(c, "host-probe", 9).test(fh, 1, 20, 1)
check(st == DENIED and h["excl"] == 1 and h["off"] == 0 and h["len"] == 100,
      "the host's TEST does not see the guest's [0,100): %r %r" % (st, h))
print("host sees the guest's lock:", h)
PY
nfs_client "$URL" put host-checked "x"
rc=0
wait $VMPID || rc=$?
cat "$T/vm.out"
[ "$rc" -eq 0 ] || fail "the guest failed (rc $rc)"
grep -q "PASS: all" "$T/vm.out" || fail "no pass line from the guest"
pass "Linux kernel client, NFSv3 with locking: fcntl and flock between processes and mounts; the host's NLM client sees the guest's lock"
