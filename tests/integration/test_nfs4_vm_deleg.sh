#!/usr/bin/env bash
# NFSv4.1 delegations with the Linux kernel client (a Debian guest under qemu,
# ../shared/vm) and a second client on the host (tests/integration/nfs4_deleg_rpc.py):
#   - the guest holds a file open for read (a read delegation: its back channel is its
#     own connection); the host's OPEN for write waits (DELAY) while the guest is
#     called back, and once it got through and wrote, the guest reads the new data
#     with no I/O error, and its DELEGRETURN count (/proc/self/mountstats) went up;
#   - the guest writes a file it holds open (a write delegation: its data may sit in
#     its cache); the host's GETATTR sees the guest's size at once (the server asks the
#     guest with CB_GETATTR, no DELAY); the host's OPEN for read recalls it, and reads
#     the guest's data.
# Exits 77 (skip) only when the VM image cannot be built on this machine.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

vm_require

sparse_files "$T/dev" 4G a
printf 'nfs_lease_time = 30\nnfs_delegations = 1\n' >"$T/lease.conf"
daemon_start d1 --config "$T/lease.conf"
nfs_ports d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
expect_share /tank/share

GUEST="$T/guest-deleg.sh"
cat >"$GUEST" <<'G'
#!/bin/bash
set -u
fail() { echo "FAIL: $*"; dmesg | tail -n 15; exit 1; }
M=/mnt/nfs
OPTS=vers=4.1,port=${NFS_PORT:-2049},timeo=100,retrans=2
returns() { awk -v m=" $M " '$0 ~ "mounted on" { on = index($0, m) > 0 } on && $1 == "DELEGRETURN:" { print $2; exit }' /proc/self/mountstats; }
mkdir -p $M
timeout 60 mount -t nfs4 -o $OPTS $SERVER:/tank/share $M || fail mount
echo guest-data > $M/r || fail "write r"
echo "" > $M/w || fail "create w"
umount $M || fail umount
timeout 60 mount -t nfs4 -o $OPTS $SERVER:/tank/share $M || fail remount
# A: a read delegation, recalled by the host's write.
exec 3<$M/r || fail "open r"
[ "$(cat <&3)" = guest-data ] || fail "read r"
before=$(returns)
echo "GUEST-READY-A returns=$before"
got=
for i in $(seq 1 150); do
    got=$(cat $M/r) || fail "read r while the host writes (I/O error)"
    [ "$got" = host-wrote ] && break
    sleep 1
done
[ "$got" = host-wrote ] || fail "the guest never saw the host's write (reads '$got')"
after=$(returns)
echo "DELEGRETURN before $before after $after"
[ "$after" -gt "$before" ] || fail "no DELEGRETURN: the guest held no delegation or kept it"
exec 3<&-
# B: a write delegation, recalled by the host's read.
exec 4>$M/w || fail "open w"
echo guest-cached >&4 || fail "write w"
before=$(returns)
echo "GUEST-READY-B returns=$before"
for i in $(seq 1 150); do
    [ "$(returns)" -gt "$before" ] && break
    sleep 1
done
after=$(returns)
echo "DELEGRETURN before $before after $after"
[ "$after" -gt "$before" ] || fail "the write delegation was not returned on the host's read"
echo more >&4 || fail "write w after the recall"
exec 4>&-
[ "$(cat $M/w)" = "$(printf 'guest-cached\nmore')" ] || fail "w reads '$(cat $M/w)'"
umount $M || fail umount
echo "PASS: delegations"
G

DELEGRPC="python3 $CAIRN_SRC/tests/integration/nfs4_deleg_rpc.py"
VM_NFS_PORT=$NFS_PORT VM_ISCSI_PORT=0 "$VM_DIR/run-vm.sh" "$GUEST" >"$T/vm.out" 2>&1 &
VM=$!
wait_marker() {
    for _ in $(seq 1 600); do
        grep -q "$1" "$T/vm.out" && return 0
        kill -0 $VM 2>/dev/null || break
        sleep 1
    done
    cat "$T/vm.out"
    fail "the guest never said $1"
}
wait_marker GUEST-READY-A
$DELEGRPC 127.0.0.1 "$NFS_PORT" /tank/share "host-$$" hostwrite r host-wrote \
    >"$T/host-a.out" 2>&1 || { cat "$T/host-a.out" "$T/vm.out"; fail "the host's write"; }
wait_marker GUEST-READY-B
$DELEGRPC 127.0.0.1 "$NFS_PORT" /tank/share "host-$$" hostgetattr w 13 \
    >"$T/host-g.out" 2>&1 || { cat "$T/host-g.out" "$T/vm.out"; fail "the host's GETATTR"; }
$DELEGRPC 127.0.0.1 "$NFS_PORT" /tank/share "host-$$" hostread w "guest-cached
" >"$T/host-b.out" 2>&1 || { cat "$T/host-b.out" "$T/vm.out"; fail "the host's read"; }
rc=0
wait $VM || rc=$?
cat "$T/vm.out"
echo "host write: $(cat "$T/host-a.out"); host read: $(cat "$T/host-b.out")"
[ "$rc" -eq 0 ] || fail "the guest failed (rc $rc)"
grep -q "PASS: delegations" "$T/vm.out" || fail "no pass line"
grep -q "delays [1-9]" "$T/host-a.out" || fail "the host's write was never held back (no delegation?)"
grep -q "delays [1-9]" "$T/host-b.out" || fail "the host's read was never held back (no write delegation?)"
grep -q "delays 0" "$T/host-g.out" ||
    fail "the host's GETATTR under the write delegation was held back: $(cat "$T/host-g.out")"
pass "the kernel client's read and write delegations are recalled by the host's opens, no I/O error"
daemon_stop
