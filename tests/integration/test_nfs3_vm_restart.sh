#!/usr/bin/env bash
# The Linux kernel's NFSv3 client (the Debian guest of ../shared/vm) keeps writing and
# reading through three SIGKILL restarts of cairnd and never sees an error: each
# restart widens the moment between the NFS port coming back and the share being
# exported again to 3 s (CAIRND_DEBUG_DELAY_EXPORTS_MS), the window in which the
# client's writes used to fail with "Stale file handle". Slow (software emulation);
# exits 77 (skip) only when the VM image cannot be built.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

vm_require

sparse_files "$T/dev" 4G a
P=$(cairn_random_port)
PORTS=(--nfs-listen "127.0.0.1:$P" --mount-listen "127.0.0.1:$((P + 1))"
       --portmap-listen "127.0.0.1:$((P + 2))" --iscsi-listen "127.0.0.1:$((P + 3))")
nfs_daemon_start d1 "${PORTS[@]}"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
expect_share /tank/share

GUEST="$T/guest-restart.sh"
cat >"$GUEST" <<'G'
#!/bin/bash
fail() { echo "FAIL: $*"; dmesg | tail -n 15; exit 1; }
M=/mnt/nfs3
mkdir -p $M
# hard: the client waits through the daemon's absence, as a real client does; noac:
# the host's stop file is seen at once.
timeout 120 mount -t nfs -o vers=3,proto=tcp,port=$NFS_PORT,mountport=$MOUNTD_PORT,mountproto=tcp,nolock,hard,noac,timeo=30 \
    $SERVER:/tank/share $M || fail "mount"
echo WRITING
i=0
while [ ! -e $M/stop ]; do
    i=$((i + 1))
    f=$M/f.$((i % 4))
    out=$(dd if=/dev/urandom of=$f.new bs=64k count=2 conv=fsync status=none 2>&1) ||
        fail "write $i: $out"
    out=$(mv $f.new $f 2>&1) || fail "rename $i: $out"
    [ "$(stat -c %s $f)" = 131072 ] || fail "size $i"
    out=$(cat $f 2>&1 >/dev/null) || fail "read $i: $out"
    echo "PROGRESS $i"
done
echo "WROTE $i"
dmesg | grep -i -E 'stale|nfs' | tail -n 5
umount $M || fail umount
echo "PASS: restarts"
G

VM_NFS_PORT=$NFS_PORT VM_MOUNTD_PORT=$MOUNT_PORT VM_RPCBIND_PORT=0 VM_ISCSI_PORT=0 \
    "$VM_DIR/run-vm.sh" "$GUEST" >"$T/vm.out" 2>&1 &
VMPID=$!
progress() { grep -c '^PROGRESS' "$T/vm.out" || true; }
# wait_progress N: until the guest has made N more steps (it may be waiting out a restart).
wait_progress() {
    local want=$(( $(progress) + $1 )) i
    for i in $(seq 1 3000); do
        [ "$(progress)" -ge "$want" ] && return 0
        grep -q '^FAIL' "$T/vm.out" && fail "guest: $(grep '^FAIL' "$T/vm.out")"
        kill -0 "$VMPID" 2>/dev/null || fail "the VM ended: $(tail -n 20 "$T/vm.out")"
        sleep 0.2
    done
    fail "the guest made no progress in 600 s: $(tail -n 20 "$T/vm.out")"
}
wait_progress 3
for round in 1 2 3; do
    daemon_kill9
    wait_unlocked "$T/dev/a"
    export CAIRND_DEBUG_DELAY_EXPORTS_MS=3000
    nfs_daemon_start d1 "${PORTS[@]}"
    unset CAIRND_DEBUG_DELAY_EXPORTS_MS
    wait_progress 3
    pass "round $round: the kernel client carried on ($(progress) steps so far)"
done
: >"$T/empty"
run_ok nfs-cp "$T/empty" "$(nfs_url /tank/share/stop)"
rc=0
wait "$VMPID" || rc=$?
[ "$rc" -eq 0 ] || fail "the guest failed (rc $rc): $(tail -n 25 "$T/vm.out")"
grep -q 'PASS: restarts' "$T/vm.out" || fail "no pass line: $(tail -n 20 "$T/vm.out")"
pass "kernel NFSv3 client: $(grep '^WROTE' "$T/vm.out"), three SIGKILL restarts, no error"
