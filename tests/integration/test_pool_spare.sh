#!/usr/bin/env bash
# Hot spares (files as disks; "fault:FILE" fails every I/O while FILE.eio exists).
#  - `pool create ... spare DEV...` and `pool add POOL spare DEV`: `pool status` lists
#    them under `spares` as AVAIL; kept across export and import.
#  - bad input refused with one line and nothing changed: a spare that is a pool member,
#    one given twice, a missing file, a too small one, `pool remove` of a data disk or of
#    a spare in use; `pool add -n` makes the same checks of spares and prints them (with
#    the logs and cache sections) in the tree it would give.
#  - a disk that stops answering while an NFS client and an iSCSI initiator write is
#    FAULTED and an available spare steps in by itself (spare-N in the tree, INUSE) and
#    is resilvered; `pool replace POOL FAILED NEW` then replaces it and the spare steps
#    back out (AVAIL); every byte the clients wrote verifies.
#  - the failed disk answers again: `pool clear POOL FAILED` (or `online`) reopens it, and
#    once it is resilvered the spare steps back out by itself (AVAIL), the disk is a plain
#    member; a second fault takes the same spare again.
#  - a disk missing at import: the spare steps in at import, by itself.
#  - the space a user reads stays right: the pool's size and a dataset's used+available
#    do not change while a spare stands in or after it returns (a spare adds no capacity).
#  - raidz2: a spare steps in; `pool detach POOL FAILED` keeps the spare for good (it
#    leaves the spares list); a scrub finds nothing and `cairn check` is clean.
#  - events: vdev_spare, resilver start/finish, vdev_attach, vdev_remove.
#  - by hand: `pool replace POOL DEV SPARE` takes a spare in, `pool detach POOL SPARE`
#    returns it (AVAIL), and a spare in use cannot be taken twice.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

BLOCKS=2048
cat >"$T/cairnd.conf" <<EOF
fault_errors = 5
EOF
PORT=$(cairn_random_port)
P=127.0.0.1:$((PORT + 3))
nfs_daemon_start d1 --config "$T/cairnd.conf" --iscsi-listen "$P"

# ---- mirror: create with spares, refusals, a spare steps in, replace, it steps out ----
d=$T/m
sparse_files "$d" 256M l1 l2 s1 s2 new lg
L1=fault:$d/l1 L2=fault:$d/l2
run_ok "$CAIRN" pool create sm mirror "$L1" "$L2" spare "$d/s1"
run_ok "$CAIRN" create -o sharenfs=no_root_squash sm/fs
[ "$(spare_row sm "$d/s1")" = AVAIL ] || fail "s1 not AVAIL: $(cat "$LAST_STDOUT")"
expect_stdout "state: ONLINE"
cp "$LAST_STDOUT" "$T/status.before"

run_fail "$CAIRN" pool add sm spare "$L1"
expect_stderr "already in pool 'sm'"
run_fail "$CAIRN" pool add sm spare "$d/s1"
expect_stderr "already a spare of pool 'sm'"
run_fail "$CAIRN" pool add sm spare "$d/nosuch"
expect_stderr "cannot open"
run_fail "$CAIRN" pool add sm spare
expect_stderr "'spare' needs at least one device"
truncate -s 16M "$d/tiny"
for n in "" -n; do
    run_fail "$CAIRN" pool add $n sm spare "$d/tiny"
    expect_stderr "'$d/tiny' is too small"
    run_fail "$CAIRN" pool add $n sm spare "$d/s2" "$d/s2"
    expect_stderr "'$d/s2' is given more than once"
    run_fail "$CAIRN" pool add $n sm spare "$d/s1"
    expect_stderr "already a spare of pool 'sm'"
    run_fail "$CAIRN" pool add $n sm spare "$L1"
    expect_stderr "already in pool 'sm'"
done
run_ok "$CAIRN" pool add -n sm log "$d/lg" spare "$d/s2"
expect_stdout "would update 'sm' to the following configuration"
awk '/^\tlogs$/ { s = "l" } /^\tspares$/ { s = "s" } /^\tcache$/ { s = "c" }
    s == "l" && $1 == p "/lg" { l = 1 } s == "s" && $1 == p "/s1" { s1 = 1 } s == "s" && $1 == p "/s2" { s2 = 1 }
    END { exit !(l && s1 && s2) }' p="$d" "$LAST_STDOUT" ||
    fail "add -n does not show the log and both spares: $(cat "$LAST_STDOUT")"
run_fail "$CAIRN" pool remove sm "$L2"
run_ok "$CAIRN" pool status sm
cmp -s "$LAST_STDOUT" "$T/status.before" || fail "a refused command changed the pool: $(cat "$LAST_STDOUT")"
space0=$(pool_space sm)
run_ok "$CAIRN" pool add sm spare "$d/s2"
[ "$(spare_row sm "$d/s2")" = AVAIL ] || fail "s2 not added: $(cat "$LAST_STDOUT")"
same_space sm "$space0" "after a spare was added"
run_ok "$CAIRN" pool remove sm "$d/s2"
[ -z "$(spare_row sm "$d/s2")" ] || fail "s2 still listed after remove"
pass "spares: create, add, remove; bad input refused, nothing changed"

space0=$(pool_space sm)
fail_under_load sm 41 16 "$d/l2"
wait_spare_in sm "$d/s1"
grep -q "$L2 .*FAULTED" "$LAST_STDOUT" || fail "l2 not FAULTED under the spare: $(cat "$LAST_STDOUT")"
grep -qE "^	 +$d/s1 +ONLINE" "$LAST_STDOUT" || fail "s1 not ONLINE in the tree: $(cat "$LAST_STDOUT")"
run_fail "$CAIRN" pool remove sm "$d/s1"
expect_stderr "the spare is in use"
run_fail "$CAIRN" pool add sm spare "$d/s1"
expect_stderr "already"
same_space sm "$space0" "with the spare in use"
pass "a FAULTED disk's spare steps in by itself and is resilvered; the space is unchanged"

# replace of the failed disk: the spare steps back out once the new disk is whole.
run_ok "$CAIRN" pool replace sm "$L2" "$d/new"
wait_acks 100
run_ok "$CAIRN" pool wait -t resilver sm
[ "$(spare_row sm "$d/s1")" = AVAIL ] || fail "s1 not AVAIL after the replace: $(cat "$LAST_STDOUT")"
expect_stdout "state: ONLINE"
! grep -q "spare-[0-9]\|$d/l2" "$LAST_STDOUT" || fail "spare-N or l2 still in the tree: $(cat "$LAST_STDOUT")"
grep -qE "^	 +$d/new +ONLINE" "$LAST_STDOUT" || fail "new disk not in the mirror: $(cat "$LAST_STDOUT")"
load_verified sm
same_space sm "$space0" "after the spare returned"
run_ok "$CAIRN" pool events -H sm
for c in "sysevent.fs.cairn.vdev_spare	sm	vdev=$L2 spare=$d/s1" "sysevent.fs.cairn.resilver_finish" \
    "sysevent.fs.cairn.vdev_attach	sm	vdev=$d/new replacing=$L2" "sysevent.fs.cairn.vdev_remove	sm	vdev=$d/s1"; do
    grep -qF "$c" "$LAST_STDOUT" || fail "no event '$c': $(cat "$LAST_STDOUT")"
done
pass "replace of the failed disk: the spare steps back out (AVAIL); every write verifies"

run_ok "$CAIRN" pool export sm
check_clean sm "$d"
run_ok "$CAIRN" pool import -d "$d" sm
[ "$(spare_row sm "$d/s1")" = AVAIL ] || fail "spare lost at import: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool export sm
pass "spares survive export and import; check clean"

# ---- mirror: the failed disk answers again; clear; the spare steps back out by itself ----
d=$T/c
sparse_files "$d" 256M l1 l2 s1
L2=fault:$d/l2
run_ok "$CAIRN" pool create sc mirror "fault:$d/l1" "$L2" spare "$d/s1"
run_ok "$CAIRN" create -o sharenfs=no_root_squash sc/fs
space0=$(pool_space sc)
fail_under_load sc 43 8 "$d/l2"
wait_spare_in sc "$d/s1"
same_space sc "$space0" "with the spare in use"
rm "$d/l2.eio"
pool_put sc c 4
run_ok "$CAIRN" pool clear sc "$L2"
wait_acks 50
wait_spare_avail sc "$d/s1"
run_ok "$CAIRN" pool wait -t resilver sc
run_ok "$CAIRN" pool status sc
expect_stdout "state: ONLINE"
[ "$(leaf_row "$L2")" = "ONLINE 0 0 0" ] || fail "l2 not back in the mirror: $(cat "$LAST_STDOUT")"
! grep -qE "^	 +$d/s1 +ONLINE" "$LAST_STDOUT" || fail "s1 still in the tree: $(cat "$LAST_STDOUT")"
load_verified sc
same_space sc "$space0" "after the spare returned"
run_ok "$CAIRN" pool events -H sc
grep -qF "sysevent.fs.cairn.vdev_remove	sc	vdev=$d/s1 spare=1" "$LAST_STDOUT" ||
    fail "no event of the spare's return: $(cat "$LAST_STDOUT")"
# Again with `online`: the returned spare (listed first; its device the pool still
# holds open, which the new spare-N takes over) steps in again for the next fault.
sparse_files "$d" 256M s2
run_ok "$CAIRN" pool add sc spare "$d/s2"
touch "$d/l2.eio"
pool_put sc d 8
wait_spare_in sc "$d/s1"
[ "$(spare_row sc "$d/s2")" = AVAIL ] || fail "s2 not AVAIL: $(cat "$LAST_STDOUT")"
rm "$d/l2.eio"
run_ok "$CAIRN" pool online sc "$L2"
wait_spare_avail sc "$d/s1"
run_ok "$CAIRN" pool wait -t resilver sc
run_ok "$CAIRN" pool status sc
[ "$(leaf_row "$L2" | cut -d' ' -f1)" = ONLINE ] || fail "l2 not back after online: $(cat "$LAST_STDOUT")"
pool_verify_all sc
scrub_clean sc
run_ok "$CAIRN" pool export sc
check_clean sc "$d"
pass "the failed disk back (clear, then online) and resilvered: the spare steps back out by itself; every write verifies"

# ---- a disk missing at import: its spare steps in at import ----
d=$T/i
sparse_files "$d" 256M l1 l2 s1 new
run_ok "$CAIRN" pool create si mirror "$d/l1" "$d/l2" spare "$d/s1"
run_ok "$CAIRN" create -o sharenfs=no_root_squash si/fs
pool_put si a 8
run_ok "$CAIRN" pool export si
mkdir -p "$T/gone" && mv "$d/l2" "$T/gone/l2"
run_ok "$CAIRN" pool import -d "$d" si
wait_spare_in si "$d/s1"
expect_stdout "state: DEGRADED"
grep -qE "^	 +$d/s1 +ONLINE" "$LAST_STDOUT" || fail "s1 not in the tree: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool events -H si
grep -qF "sysevent.fs.cairn.vdev_spare	si	vdev=$d/l2 spare=$d/s1" "$LAST_STDOUT" ||
    fail "no vdev_spare event at import: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool offline si "$d/l1" # the spare alone serves every block
pool_verify_all si
run_ok "$CAIRN" pool online si "$d/l1"
run_ok "$CAIRN" pool replace si "$d/l2" "$d/new"
run_ok "$CAIRN" pool wait -t resilver si
wait_spare_avail si "$d/s1"
expect_stdout "state: ONLINE"
pool_verify_all si
scrub_clean si
run_ok "$CAIRN" pool export si
check_clean si "$d"
pass "a disk missing at import: the spare steps in by itself; replace returns it"

# ---- raidz2: a spare steps in, detach of the failed disk keeps it ----
d=$T/z
sparse_files "$d" 256M l1 l2 l3 l4 l5 s1
Z=(fault:$d/l1 fault:$d/l2 fault:$d/l3 fault:$d/l4 fault:$d/l5)
run_ok "$CAIRN" pool create sz raidz2 "${Z[@]}" spare "$d/s1"
run_ok "$CAIRN" create -o sharenfs=no_root_squash sz/fs
fail_under_load sz 42 8 "$d/l3"
wait_spare_in sz "$d/s1"
run_ok "$CAIRN" pool detach sz "${Z[2]}"
run_ok "$CAIRN" pool status sz
expect_stdout "state: ONLINE"
! grep -q 'spares' "$LAST_STDOUT" || fail "s1 still a spare after detach of the failed disk: $(cat "$LAST_STDOUT")"
grep -qE "^	 +$d/s1 +ONLINE" "$LAST_STDOUT" || fail "s1 not a raidz member: $(cat "$LAST_STDOUT")"
load_verified sz
run_ok "$CAIRN" pool export sz
check_clean sz "$d"
pass "raidz2: the spare steps in; detach of the failed disk keeps it for good"

# ---- by hand: replace DEV SPARE takes a spare in; detach SPARE returns it ----
d=$T/h
sparse_files "$d" 256M l1 l2 s1
run_ok "$CAIRN" pool create sh mirror "$d/l1" "$d/l2" spare "$d/s1"
run_ok "$CAIRN" create -o sharenfs=no_root_squash sh/fs
pool_put sh a 8
run_ok "$CAIRN" pool replace sh "$d/l1" "$d/s1"
wait_spare_in sh "$d/s1"
grep -qE "^	 +$d/l1 +ONLINE" "$LAST_STDOUT" || fail "l1 left the tree: $(cat "$LAST_STDOUT")"
run_fail "$CAIRN" pool replace sh "$d/l2" "$d/s1"
expect_stderr "already in pool 'sh'"
run_ok "$CAIRN" pool detach sh "$d/s1"
[ "$(spare_row sh "$d/s1")" = AVAIL ] || fail "s1 not AVAIL after detach: $(cat "$LAST_STDOUT")"
expect_stdout "state: ONLINE"
! grep -q 'spare-[0-9]' "$LAST_STDOUT" || fail "spare-N left behind: $(cat "$LAST_STDOUT")"
pool_verify_all sh
run_ok "$CAIRN" pool export sh
check_clean sh "$d"
pass "replace DEV SPARE takes a spare in by hand; detach SPARE returns it"
