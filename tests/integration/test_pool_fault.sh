#!/usr/bin/env bash
# Fault management on live pools (files as disks; the fault-injecting leaf
# "fault:FILE" fails every I/O while FILE.eio exists, a disk that stops answering).
#  - threshold: a few bad blocks on a disk (fewer errors than fault_errors) are
#    repaired and the disk stays ONLINE; many more make it DEGRADED "too many errors"
#    (kept in service, as zed does for checksum errors); `pool clear` makes it ONLINE.
#  - a disk that stops answering while an NFS client writes and an iSCSI initiator does
#    FUA writes becomes FAULTED by itself, the pool DEGRADED with zpool's status/action
#    advice, and the clients go on without an error; FAULTED survives a restart.
#  - `pool clear POOL DEV` of a disk that still does not answer is refused with one
#    line and changes nothing; once it answers, clear reopens it and the resilver
#    writes only what it missed; every byte the clients wrote verifies, a scrub finds
#    nothing, `cairn check` is clean after export.
#  - `pool events` shows the sequence (checksum and io ereports with the device and
#    offset, statechange FAULTED and ONLINE, clear, resilver start and finish);
#    `pool events -f` follows new ones; `-c` clears them.
#  - mirror 3-way, raidz1 and raidz2: a disk fails under the iSCSI writer, FAULTED,
#    then `pool replace` with a new disk; every acknowledged write verifies.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

CLIENT="$CAIRN_BIN/iscsi_client"
BLOCKS=2048
cat >"$T/cairnd.conf" <<EOF
fault_errors = 5
fault_window = 600
EOF
PORT=$(cairn_random_port)
P=127.0.0.1:$((PORT + 3))
start() {
    nfs_daemon_start d1 --config "$T/cairnd.conf" --nfs-listen "127.0.0.1:$PORT" \
        --mount-listen "127.0.0.1:$((PORT + 1))" --portmap-listen "127.0.0.1:$((PORT + 2))" \
        --iscsi-listen "$P"
}
start

# put POOL NAME MIB: a random file through NFS, kept locally to compare.
put() {
    head -c "$(($3 << 20))" /dev/urandom >"$T/$1.$2"
    nfs_client "$(nfs_url "/$1/fs")" putfile "$2" "$T/$1.$2"
}
verify_all() {
    local f name
    for f in "$T/$1".*; do
        name=${f##*/$1.}
        nfs-cat "$(nfs_url "/$1/fs/$name")" >"$T/readback" 2>/dev/null || fail "$1: cannot read $name back"
        cmp -s "$f" "$T/readback" || fail "$1: $name differs"
    done
}
scrub_clean() {
    run_ok "$CAIRN" pool scrub "$1"
    wait_scrub "$1"
    grep -q 'scan: scrub repaired 0 in .* with 0 errors' "$LAST_STDOUT" ||
        fail "$1: scrub: $(grep scan: "$LAST_STDOUT")"
}
# leaf_state POOL PATH: the STATE column of the leaf.
leaf_state() {
    run_ok "$CAIRN" pool status "$1"
    leaf_row "$2" | cut -d' ' -f1
}
# wait_state POOL PATH STATE: until the leaf shows STATE (fault management acts by itself).
wait_state() {
    local i
    for i in $(seq 1 300); do
        [ "$(leaf_state "$1" "$2")" = "$3" ] && return 0
        sleep 0.1
    done
    fail "$2 never became $3: $(cat "$LAST_STDOUT")"
}
# events POOL: `pool events -H POOL` into $LAST_STDOUT.
events() { run_ok "$CAIRN" pool events -H "$1"; }
# iscsi_setup POOL NAME: a volume exported as LUN 0 of target TGT.
iscsi_setup() {
    TGT=iqn.2026-12.org.cairn.test:$2
    run_ok "$CAIRN" create -V 64M "$1/vol"
    run_ok "$CAIRN" iscsi target create "$TGT"
    run_ok "$CAIRN" iscsi lun add "$TGT" "$1/vol"
}

# ---- mirror: threshold, fault under load, restart, clear, events ----
d=$T/m
sparse_files "$d" 256M l1 l2
L1=fault:$d/l1 L2=fault:$d/l2
run_ok "$CAIRN" pool create fm mirror "$L1" "$L2"
run_ok "$CAIRN" create -o sharenfs=no_root_squash fm/fs
put fm a 16  # (putfile sends at most 16 MiB)
scrub_clean fm

# Below the threshold: three bad blocks on l2 are repaired, l2 stays ONLINE.
[ "$(corrupt_data "$d/l2" 3 11)" = 3 ] || fail "could not corrupt l2"
run_ok "$CAIRN" pool scrub fm
wait_scrub fm
row=$(leaf_row "$L2")
[ "${row%% *}" = ONLINE ] || fail "l2 after 3 bad blocks: $row"
[ "$(cut -d' ' -f4 <<<"$row")" -ge 1 ] || fail "no checksum error counted on l2: $row"
expect_stdout "state: ONLINE"
events fm
grep -P "\tereport\.fs\.cairn\.checksum\tfm\tvdev=$L2 op=checksum offset=[0-9]+ size=[0-9]+" "$LAST_STDOUT" >/dev/null ||
    fail "no checksum ereport naming l2 and an offset: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool clear fm
[ "$(leaf_state fm "$L2")" = ONLINE ] && [ "$(leaf_row "$L2")" = "ONLINE 0 0 0" ] ||
    fail "clear left counts: $(leaf_row "$L2")"
pass "errors below the threshold: repaired, ONLINE"

# Above it: many bad blocks make l2 DEGRADED (too many errors) but it stays in service.
corrupt_data "$d/l2" 60 12 >/dev/null
run_ok "$CAIRN" pool scrub fm
wait_scrub fm
[ "$(leaf_row "$L2" | cut -d' ' -f1)" = DEGRADED ] || fail "l2 after 60 bad blocks: $(cat "$LAST_STDOUT")"
grep -q "$L2 .*too many errors" "$LAST_STDOUT" || fail "no 'too many errors': $(cat "$LAST_STDOUT")"
expect_stdout "status: One or more devices has experienced an unrecoverable error"
scrub_clean fm # the first scrub repaired every block l2 returned bad
run_ok "$CAIRN" pool clear fm "$L2"
[ "$(leaf_state fm "$L2")" = ONLINE ] || fail "clear did not make l2 ONLINE"
pass "errors above the threshold: DEGRADED, repaired, clear"

# A disk that stops answering under NFS and iSCSI writers: FAULTED by itself.
iscsi_setup fm fm
ACKS="$T/acks.fm" SEED=21
start_writer
wait_acks 100
events fm
before=$(tail -n 1 "$LAST_STDOUT" | cut -f1)
"$CAIRN" pool events -f fm >"$T/follow" 2>&1 &
FOLLOW=$!
touch "$d/l2.eio"
put fm b 16 # NFS writes while the disk fails
wait_acks 200
wait_state fm "$L2" FAULTED
expect_stdout "state: DEGRADED"
expect_stdout "status: One or more devices are faulted in response to persistent errors"
expect_stdout "action: Replace the faulted device, or use 'cairn pool clear'"
grep -q "$L2 .*too many errors" "$LAST_STDOUT" || fail "no 'too many errors' on the FAULTED leaf"
put fm c 8
wait_acks 100
grep -q "resource.fs.cairn.statechange .*vdev=$L2 state=FAULTED" "$T/follow" ||
    fail "events -f did not show the fault: $(cat "$T/follow")"
kill "$FOLLOW"
wait "$FOLLOW" 2>/dev/null || true
events fm
grep -P "\tereport\.fs\.cairn\.io\tfm\tvdev=$L2 op=(write|read|flush)" "$LAST_STDOUT" >/dev/null ||
    fail "no io ereport for l2: $(cat "$LAST_STDOUT")"
pass "a disk that stops answering is FAULTED under load; clients see no error"

# clear of a disk that still does not answer: refused, nothing changes.
run_fail "$CAIRN" pool clear fm "$L2"
expect_stderr "cannot reopen '$L2': the device does not answer"
[ "$(leaf_state fm "$L2")" = FAULTED ] || fail "refused clear changed l2"
run_fail "$CAIRN" pool online fm "$L2"
expect_stderr "cannot reopen '$L2': the device does not answer"
run_fail "$CAIRN" pool clear fm "$d/nosuch"
expect_stderr "no such device"
run_fail "$CAIRN" pool events nosuchpool
expect_stderr "no such pool 'nosuchpool'"
pass "clear of a disk that does not answer is refused"

# FAULTED survives a restart (the labels say so), even with the disk answering again:
# only the administrator's clear (or online) takes it back.
stop_writer
rm "$d/l2.eio"
daemon_stop
start
[ "$(leaf_state fm "$L2")" = FAULTED ] || fail "FAULTED lost at restart: $(cat "$LAST_STDOUT")"
run_ok "$CLIENT" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
verify_all fm
pass "FAULTED survives a restart; every write verifies"

# It answers again: clear reopens it and only what it missed is resilvered.
run_ok "$CAIRN" pool clear fm "$L2"
run_ok "$CAIRN" pool wait -t resilver fm
run_ok "$CAIRN" pool status fm
[ "$(leaf_row "$L2")" = "ONLINE 0 0 0" ] || fail "l2 after clear: $(cat "$LAST_STDOUT")"
expect_stdout "state: ONLINE"
r=$(sed -n 's/.*scan: resilvered \([^ ]*\) in .* with 0 errors on .*/\1/p' "$LAST_STDOUT")
[ -n "$r" ] || fail "no finished resilver: $(cat "$LAST_STDOUT")"
rb=$(numfmt --from=iec "$r")
run_ok "$CAIRN" pool list -H -p fm
alloc=$(cut -f3 "$LAST_STDOUT")
[ "$rb" -gt 0 ] && [ "$rb" -lt "$alloc" ] || fail "resilvered $rb of $alloc allocated"
verify_all fm
run_ok "$CLIENT" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
scrub_clean fm
events fm
# (The daemon restarted since the fault: its events are in memory only, as zpool's.)
for c in "sysevent.fs.cairn.vdev_clear	fm	vdev=$L2" \
    "resource.fs.cairn.statechange	fm	vdev=$L2 state=ONLINE" "sysevent.fs.cairn.resilver_start" \
    "sysevent.fs.cairn.resilver_finish	fm	state=finished" "sysevent.fs.cairn.scrub_finish"; do
    grep -qF "$c" "$LAST_STDOUT" || fail "no event '$c': $(cat "$LAST_STDOUT")"
done
# In order: the clear, the device back, its resilver.
awk -F'\t' -v l="vdev=$L2" '$2 == "sysevent.fs.cairn.vdev_clear" && $4 == l { c = NR }
    $2 == "resource.fs.cairn.statechange" && $4 == l " state=ONLINE" && c { o = NR }
    $2 == "sysevent.fs.cairn.resilver_finish" && o { f = NR } END { exit !(c && o && f) }' "$LAST_STDOUT" ||
    fail "events out of order: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool events -c
expect_stdout "cleared [0-9]+ events"
events fm
[ ! -s "$LAST_STDOUT" ] || fail "events after -c: $(cat "$LAST_STDOUT")"
pass "clear reopens the disk, resilvers what it missed; events in order"

run_ok "$CAIRN" iscsi target destroy -f "$TGT"
run_ok "$CAIRN" pool export fm
check_clean fm "$d"
pass "mirror: check clean after export"

# ---- other layouts: a disk fails under the iSCSI writer, then replace ----
fail_and_replace() {
    local pool=$1 type=$2 n=$3 dir="$T/$1" paths=() i
    for i in $(seq 1 "$n"); do paths+=("fault:$dir/l$i"); done
    sparse_files "$dir" 256M $(seq -f 'l%g' 1 "$n") new
    run_ok "$CAIRN" pool create "$pool" $type "${paths[@]}"
    run_ok "$CAIRN" create -o sharenfs=no_root_squash "$pool/fs"
    iscsi_setup "$pool" "$pool"
    ACKS="$T/acks.$pool" SEED=$((30 + n))
    start_writer
    put "$pool" a 8
    touch "$dir/l2.eio"
    put "$pool" b 8
    wait_acks 300
    wait_state "$pool" "${paths[1]}" FAULTED
    expect_stdout "state: DEGRADED"
    run_ok "$CAIRN" pool replace "$pool" "${paths[1]}" "$dir/new"
    wait_acks 100
    run_ok "$CAIRN" pool wait -t resilver "$pool"
    stop_writer
    run_ok "$CAIRN" pool status "$pool"
    expect_stdout "state: ONLINE"
    ! grep -q "$dir/l2" "$LAST_STDOUT" || fail "$pool: the failed disk is still listed"
    run_ok "$CLIENT" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
    verify_all "$pool"
    scrub_clean "$pool"
    events "$pool"
    grep -qF "sysevent.fs.cairn.vdev_attach	$pool	vdev=$dir/new replacing=${paths[1]}" "$LAST_STDOUT" ||
        fail "$pool: no attach event: $(cat "$LAST_STDOUT")"
    run_ok "$CAIRN" iscsi target destroy -f "$TGT"
    run_ok "$CAIRN" pool export "$pool"
    check_clean "$pool" "$dir"
    pass "$pool ($type x$n): FAULTED under load, replaced, every write verifies"
}
fail_and_replace fm3 mirror 3
fail_and_replace fz1 raidz1 4
fail_and_replace fz2 raidz2 5
