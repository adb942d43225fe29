#!/usr/bin/env bash
# Hot spares (files as disks; "fault:FILE" fails every I/O while FILE.eio exists).
#  - `pool create ... spare DEV...` and `pool add POOL spare DEV`: `pool status` lists
#    them under `spares` as AVAIL; kept across export and import.
#  - bad input refused with one line and nothing changed: a spare that is a pool member,
#    one given twice, a missing file, `pool remove` of a data disk or of a spare in use.
#  - a disk that stops answering while an NFS client and an iSCSI initiator write is
#    FAULTED and an available spare steps in by itself (spare-N in the tree, INUSE) and
#    is resilvered; `pool replace POOL FAILED NEW` then replaces it and the spare steps
#    back out (AVAIL); every byte the clients wrote verifies.
#  - raidz2: a spare steps in; `pool detach POOL FAILED` keeps the spare for good (it
#    leaves the spares list); a scrub finds nothing and `cairn check` is clean.
#  - events: vdev_spare, resilver start/finish, vdev_attach, vdev_remove.
#  - by hand: `pool replace POOL DEV SPARE` takes a spare in, `pool detach POOL SPARE`
#    returns it (AVAIL), and a spare in use cannot be taken twice.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

CLIENT="$CAIRN_BIN/iscsi_client"
BLOCKS=2048
cat >"$T/cairnd.conf" <<EOF
fault_errors = 5
EOF
PORT=$(cairn_random_port)
P=127.0.0.1:$((PORT + 3))
nfs_daemon_start d1 --config "$T/cairnd.conf" --iscsi-listen "$P"

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
# spare_row POOL PATH: the state the spares section gives PATH (empty: not listed).
spare_row() {
    run_ok "$CAIRN" pool status "$1"
    sed -n '/^	spares$/,/^$/p' "$LAST_STDOUT" | awk -v p="$2" '$1 == p { print $2 }'
}
# wait_spare_in POOL SPARE: until SPARE is INUSE under a spare-N vdev and resilvered.
wait_spare_in() {
    local i
    for i in $(seq 1 300); do
        if [ "$(spare_row "$1" "$2")" = INUSE ] && grep -q 'spare-[0-9]' "$LAST_STDOUT"; then
            run_ok "$CAIRN" pool wait -t resilver "$1"
            run_ok "$CAIRN" pool status "$1"
            return 0
        fi
        sleep 0.1
    done
    fail "$2 never stepped in: $(cat "$LAST_STDOUT")"
}
iscsi_setup() {
    TGT=iqn.2026-12.org.cairn.test:$1
    run_ok "$CAIRN" create -V 64M "$1/vol"
    run_ok "$CAIRN" iscsi target create "$TGT"
    run_ok "$CAIRN" iscsi lun add "$TGT" "$1/vol"
}

# ---- mirror: create with spares, refusals, a spare steps in, replace, it steps out ----
d=$T/m
sparse_files "$d" 256M l1 l2 s1 s2 new
L1=fault:$d/l1 L2=fault:$d/l2
run_ok "$CAIRN" pool create sm mirror "$L1" "$L2" spare "$d/s1"
run_ok "$CAIRN" create -o sharenfs=no_root_squash sm/fs
[ "$(spare_row sm "$d/s1")" = AVAIL ] || fail "s1 not AVAIL: $(cat "$LAST_STDOUT")"
expect_stdout "state: ONLINE"
cp "$LAST_STDOUT" "$T/status.before"

run_fail "$CAIRN" pool add sm spare "$L1"
expect_stderr "already a device of pool 'sm'"
run_fail "$CAIRN" pool add sm spare "$d/s1"
expect_stderr "already a spare of pool 'sm'"
run_fail "$CAIRN" pool add sm spare "$d/nosuch"
expect_stderr "cannot open"
run_fail "$CAIRN" pool add sm spare
expect_stderr "'spare' needs at least one device"
run_fail "$CAIRN" pool remove sm "$L2"
run_ok "$CAIRN" pool status sm
cmp -s "$LAST_STDOUT" "$T/status.before" || fail "a refused command changed the pool: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool add sm spare "$d/s2"
[ "$(spare_row sm "$d/s2")" = AVAIL ] || fail "s2 not added: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool remove sm "$d/s2"
[ -z "$(spare_row sm "$d/s2")" ] || fail "s2 still listed after remove"
pass "spares: create, add, remove; bad input refused, nothing changed"

iscsi_setup sm
ACKS="$T/acks.sm" SEED=41
start_writer
put sm a 16
touch "$d/l2.eio"
put sm b 16
wait_acks 300
wait_spare_in sm "$d/s1"
grep -q "$L2 .*FAULTED" "$LAST_STDOUT" || fail "l2 not FAULTED under the spare: $(cat "$LAST_STDOUT")"
grep -qE "^	 +$d/s1 +ONLINE" "$LAST_STDOUT" || fail "s1 not ONLINE in the tree: $(cat "$LAST_STDOUT")"
run_fail "$CAIRN" pool remove sm "$d/s1"
expect_stderr "the spare is in use"
run_fail "$CAIRN" pool add sm spare "$d/s1"
expect_stderr "already"
pass "a FAULTED disk's spare steps in by itself and is resilvered"

# replace of the failed disk: the spare steps back out once the new disk is whole.
run_ok "$CAIRN" pool replace sm "$L2" "$d/new"
wait_acks 100
run_ok "$CAIRN" pool wait -t resilver sm
stop_writer
[ "$(spare_row sm "$d/s1")" = AVAIL ] || fail "s1 not AVAIL after the replace: $(cat "$LAST_STDOUT")"
expect_stdout "state: ONLINE"
! grep -q "spare-[0-9]\|$d/l2" "$LAST_STDOUT" || fail "spare-N or l2 still in the tree: $(cat "$LAST_STDOUT")"
grep -qE "^	 +$d/new +ONLINE" "$LAST_STDOUT" || fail "new disk not in the mirror: $(cat "$LAST_STDOUT")"
run_ok "$CLIENT" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
verify_all sm
scrub_clean sm
run_ok "$CAIRN" pool events -H sm
for c in "sysevent.fs.cairn.vdev_spare	sm	vdev=$L2 spare=$d/s1" "sysevent.fs.cairn.resilver_finish" \
    "sysevent.fs.cairn.vdev_attach	sm	vdev=$d/new replacing=$L2" "sysevent.fs.cairn.vdev_remove	sm	vdev=$d/s1"; do
    grep -qF "$c" "$LAST_STDOUT" || fail "no event '$c': $(cat "$LAST_STDOUT")"
done
pass "replace of the failed disk: the spare steps back out (AVAIL); every write verifies"

run_ok "$CAIRN" iscsi target destroy -f "$TGT"
run_ok "$CAIRN" pool export sm
check_clean sm "$d"
run_ok "$CAIRN" pool import -d "$d" sm
[ "$(spare_row sm "$d/s1")" = AVAIL ] || fail "spare lost at import: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool export sm
pass "spares survive export and import; check clean"

# ---- raidz2: a spare steps in, detach of the failed disk keeps it ----
d=$T/z
sparse_files "$d" 256M l1 l2 l3 l4 l5 s1
Z=(fault:$d/l1 fault:$d/l2 fault:$d/l3 fault:$d/l4 fault:$d/l5)
run_ok "$CAIRN" pool create sz raidz2 "${Z[@]}" spare "$d/s1"
run_ok "$CAIRN" create -o sharenfs=no_root_squash sz/fs
iscsi_setup sz
ACKS="$T/acks.sz" SEED=42
start_writer
put sz a 8
touch "$d/l3.eio"
put sz b 8
wait_acks 300
wait_spare_in sz "$d/s1"
run_ok "$CAIRN" pool detach sz "${Z[2]}"
stop_writer
run_ok "$CAIRN" pool status sz
expect_stdout "state: ONLINE"
! grep -q 'spares' "$LAST_STDOUT" || fail "s1 still a spare after detach of the failed disk: $(cat "$LAST_STDOUT")"
grep -qE "^	 +$d/s1 +ONLINE" "$LAST_STDOUT" || fail "s1 not a raidz member: $(cat "$LAST_STDOUT")"
run_ok "$CLIENT" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
verify_all sz
scrub_clean sz
run_ok "$CAIRN" iscsi target destroy -f "$TGT"
run_ok "$CAIRN" pool export sz
check_clean sz "$d"
pass "raidz2: the spare steps in; detach of the failed disk keeps it for good"

# ---- by hand: replace DEV SPARE takes a spare in; detach SPARE returns it ----
d=$T/h
sparse_files "$d" 256M l1 l2 s1
run_ok "$CAIRN" pool create sh mirror "$d/l1" "$d/l2" spare "$d/s1"
run_ok "$CAIRN" create -o sharenfs=no_root_squash sh/fs
put sh a 8
run_ok "$CAIRN" pool replace sh "$d/l1" "$d/s1"
wait_spare_in sh "$d/s1"
grep -qE "^	 +$d/l1 +ONLINE" "$LAST_STDOUT" || fail "l1 left the tree: $(cat "$LAST_STDOUT")"
run_fail "$CAIRN" pool replace sh "$d/l2" "$d/s1"
expect_stderr "already in pool 'sh'"
run_ok "$CAIRN" pool detach sh "$d/s1"
[ "$(spare_row sh "$d/s1")" = AVAIL ] || fail "s1 not AVAIL after detach: $(cat "$LAST_STDOUT")"
expect_stdout "state: ONLINE"
! grep -q 'spare-[0-9]' "$LAST_STDOUT" || fail "spare-N left behind: $(cat "$LAST_STDOUT")"
verify_all sh
run_ok "$CAIRN" pool export sh
check_clean sh "$d"
pass "replace DEV SPARE takes a spare in by hand; detach SPARE returns it"
