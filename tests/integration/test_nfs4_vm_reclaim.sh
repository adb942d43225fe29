#!/usr/bin/env bash
# State reclaim after a crash, with the Linux kernel's NFSv4.1 client: the guest opens
# a file and locks it; cairnd is killed with SIGKILL while the lock is held and
# restarted on the same port; the server, which recorded the client in its state
# directory, starts in grace and lets it reclaim its open and its lock, so the guest
# writes through the same descriptor and unlocks without an error. Exits 77 (skip)
# only when the VM image cannot be built.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

vm_require

sparse_files "$T/dev" 4G a
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
expect_share /tank/share
PORT=$NFS_PORT

cat >"$T/guest.sh" <<'GUEST'
#!/bin/bash
set -u
fail() { echo "FAIL: $*"; dmesg | tail -n 20; exit 1; }
M=/mnt/nfs
mkdir -p $M
timeout 60 mount -t nfs4 -o vers=4.1,port=$NFS_PORT,timeo=50,retrans=2 $SERVER:/tank/share $M || fail mount
cd $M || fail cd
echo "before crash" >held || fail write
exec 3<>held
flock -x 3 || fail flock
echo HELD
# The host kills and restarts the server meanwhile; the client notices on its
# next call and reclaims.
sleep 40
echo "after crash" >&3 || fail "write through the reclaimed open"
flock -u 3 || fail "unlock of the reclaimed lock"
exec 3>&-
[ "$(head -c 11 held)" = "after crash" ] || fail "content: $(cat held)"
dmesg | grep -iE "reclaim failed|lost lock|lock.*lost" && fail "the client lost state"
cd /
umount $M || fail umount
echo "PASS: reclaim"
GUEST

VM_NFS_PORT=$PORT VM_ISCSI_PORT=0 GUEST_TIMEOUT=300 "$VM_DIR/run-vm.sh" "$T/guest.sh" >"$T/vm.out" 2>&1 &
VM_PID=$!
for i in $(seq 1 300); do
    grep -q '^HELD' "$T/vm.out" && break
    kill -0 "$VM_PID" 2>/dev/null || break
    sleep 0.5
done
grep -q '^HELD' "$T/vm.out" || { cat "$T/vm.out"; fail "the guest never took its lock"; }
[ -s "$T/d1/nfs/nfs4-clients" ] || fail "no NFSv4 client record while a client holds state"

daemon_kill9
daemon_start d1 --nfs-listen "127.0.0.1:$PORT"
grep -aq "nfs port $PORT" "$T/d1.daemon.log" || fail "the restarted server is not on port $PORT"

rc=0
wait "$VM_PID" || rc=$?
cat "$T/vm.out"
[ "$rc" -eq 0 ] || fail "the guest failed (rc $rc)"
grep -q "PASS: reclaim" "$T/vm.out" || fail "no reclaim pass line"
pass "after SIGKILL the Linux client reclaimed its open and lock during grace"
daemon_stop
