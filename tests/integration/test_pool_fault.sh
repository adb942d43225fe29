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
#  - mirror 3-way, raidz1, raidz2 (two disks), raidz3 (three disks) and two striped
#    mirrors (a disk of each): disks fail under the NFS and iSCSI writers, FAULTED, then
#    `pool replace` with new disks; every acknowledged write and NFS file verifies, a
#    scrub finds nothing, `cairn check` is clean, and the pool's size and the space a
#    dataset shows (used+available) are what they were before the fault.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

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

# events POOL: `pool events -H POOL` into $LAST_STDOUT.
events() { run_ok "$CAIRN" pool events -H "$1"; }

# ---- mirror: threshold, fault under load, restart, clear, events ----
d=$T/m
sparse_files "$d" 256M l1 l2
L1=fault:$d/l1 L2=fault:$d/l2
run_ok "$CAIRN" pool create fm mirror "$L1" "$L2"
run_ok "$CAIRN" create -o sharenfs=no_root_squash fm/fs
pool_put fm a 16
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
iscsi_lun_setup fm
ACKS="$T/acks.fm" SEED=21
start_writer
wait_acks 100
events fm
before=$(tail -n 1 "$LAST_STDOUT" | cut -f1)
"$CAIRN" pool events -f fm >"$T/follow" 2>&1 &
FOLLOW=$!
touch "$d/l2.eio"
pool_put fm b 16 # NFS writes while the disk fails
wait_acks 200
wait_state fm "$L2" FAULTED
expect_stdout "state: DEGRADED"
expect_stdout "status: One or more devices are faulted in response to persistent errors"
expect_stdout "action: Replace the faulted device, or use 'cairn pool clear'"
grep -q "$L2 .*too many errors" "$LAST_STDOUT" || fail "no 'too many errors' on the FAULTED leaf"
pool_put fm c 8
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
run_ok "$CAIRN_BIN/iscsi_client" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
pool_verify_all fm
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
pool_verify_all fm
run_ok "$CAIRN_BIN/iscsi_client" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
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

# ---- other layouts: disks fail under the NFS and iSCSI writers, then replace ----
# fail_and_replace POOL FAIL LAYOUT...: LAYOUT is create's grammar with leaf names (l1...)
# for fault-injecting leaves in $T/POOL; the leaves named in FAIL stop answering.
fail_and_replace() {
    local pool=$1 failing=($2) dir="$T/$1" spec=() leaves=() w l i
    shift 2
    for w in "$@"; do
        if [[ $w == l* ]]; then spec+=("fault:$dir/$w") leaves+=("$w"); else spec+=("$w"); fi
    done
    sparse_files "$dir" 256M "${leaves[@]}" $(printf 'new%s ' "${failing[@]}")
    run_ok "$CAIRN" pool create "$pool" "${spec[@]}"
    run_ok "$CAIRN" create -o sharenfs=no_root_squash "$pool/fs"
    local space0
    space0=$(pool_space "$pool")
    fail_under_load "$pool" $((30 + ${#leaves[@]})) 8 $(printf "$dir/%s " "${failing[@]}")
    for l in "${failing[@]}"; do wait_state "$pool" "fault:$dir/$l" FAULTED; done
    expect_stdout "state: DEGRADED"
    for l in "${failing[@]}"; do run_ok "$CAIRN" pool replace "$pool" "fault:$dir/$l" "$dir/new$l"; done
    wait_acks 100
    run_ok "$CAIRN" pool wait -t resilver "$pool"
    run_ok "$CAIRN" pool status "$pool"
    expect_stdout "state: ONLINE"
    for l in "${failing[@]}"; do
        ! grep -q "$dir/$l " "$LAST_STDOUT" || fail "$pool: the failed disk $l is still listed"
        [ "$(leaf_row "$dir/new$l")" = "ONLINE 0 0 0" ] || fail "$pool: new$l: $(cat "$LAST_STDOUT")"
    done
    load_verified "$pool"
    same_space "$pool" "$space0" "after the replacement"
    events "$pool"
    for l in "${failing[@]}"; do
        grep -qF "sysevent.fs.cairn.vdev_attach	$pool	vdev=$dir/new$l replacing=fault:$dir/$l" "$LAST_STDOUT" ||
            fail "$pool: no attach event for $l: $(cat "$LAST_STDOUT")"
    done
    run_ok "$CAIRN" pool export "$pool"
    check_clean "$pool" "$dir"
    pass "$pool ($*): ${failing[*]} FAULTED under load, replaced; every write verifies, space unchanged"
}
fail_and_replace fm3 l2 mirror l1 l2 l3
fail_and_replace fz1 l2 raidz1 l1 l2 l3 l4
fail_and_replace fz2 "l2 l4" raidz2 l1 l2 l3 l4 l5
fail_and_replace fz3 "l2 l3 l5" raidz3 l1 l2 l3 l4 l5 l6 l7
fail_and_replace fsm "l2 l3" mirror l1 l2 mirror l3 l4
