#!/usr/bin/env bash
# attach and detach on a live pool written through NFS (files as disks): a disk
# becomes a 2-way then a 3-way mirror, each new side resilvered from the others
# (bytes resilvered cover the data, scrub then repairs nothing, every file reads
# back); the shape survives export and import; detach takes sides out down to a
# single disk again, refusing to detach the last one; a detached disk's labels are
# cleared, so a new pool can use it without -f; `cairn check` stays clean.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

nfs_daemon_start d1
D="$T/dev"
sparse_files "$D" 256M d1 d2 d3

put() {
    head -c "$(($2 << 20))" /dev/urandom >"$T/tank.$1"
    nfs_client "$(nfs_url /tank/fs)" putfile "$1" "$T/tank.$1"
}
verify_all() {
    local f name
    for f in "$T"/tank.*; do
        name=${f##*/tank.}
        nfs-cat "nfs://127.0.0.1/tank/fs/$name?nfsport=$NFS_PORT&mountport=$MOUNT_PORT&version=3" \
            >"$T/readback" 2>/dev/null || fail "cannot read $name back"
        cmp -s "$f" "$T/readback" || fail "$name differs"
    done
}
resilvered() {
    run_ok "$CAIRN" pool wait -t resilver tank
    run_ok "$CAIRN" pool status tank
    local r
    r=$(sed -n 's/.*scan: resilvered \([^ ]*\) in .* with 0 errors on .*/\1/p' "$LAST_STDOUT")
    [ -n "$r" ] || fail "no finished resilver in: $(cat "$LAST_STDOUT")"
    numfmt --from=iec "$r"
}
scrub_clean() {
    run_ok "$CAIRN" pool scrub tank
    wait_scrub tank
    grep -q 'scan: scrub repaired 0 in .* with 0 errors' "$LAST_STDOUT" \
        || fail "scrub: $(grep scan: "$LAST_STDOUT")"
}

run_ok "$CAIRN" pool create tank "$D/d1"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/fs
put a 16; put b 16

run_ok "$CAIRN" pool attach tank "$D/d1" "$D/d2"
r=$(resilvered)
[ "$r" -gt $((30 << 20)) ] || fail "the new side got only $r bytes"
expect_stdout "mirror-0"
[ "$(leaf_row "$D/d2")" = "ONLINE 0 0 0" ] || fail "d2: $(leaf_row "$D/d2")"
put c 4
run_ok "$CAIRN" pool attach tank "$D/d2" "$D/d3"
r=$(resilvered)
[ "$r" -gt $((34 << 20)) ] || fail "the third side got only $r bytes"
verify_all
scrub_clean
pass "a disk became a 3-way mirror, each side resilvered; data and scrub clean"

run_ok "$CAIRN" pool export tank
run_ok "$CAIRN" pool import -d "$D" tank
run_ok "$CAIRN" pool status tank
for d in d1 d2 d3; do
    [ "$(leaf_row "$D/$d")" = "ONLINE 0 0 0" ] || fail "after import $d: $(leaf_row "$D/$d")"
done
expect_stdout "mirror-0"
pass "the 3-way mirror survives export and import"

run_ok "$CAIRN" pool detach tank "$D/d1"
put d 2
run_ok "$CAIRN" pool detach tank "$D/d2"
run_ok "$CAIRN" pool status tank
if grep -q "mirror-0" "$LAST_STDOUT"; then fail "still a mirror: $(cat "$LAST_STDOUT")"; fi
[ "$(leaf_row "$D/d3")" = "ONLINE 0 0 0" ] || fail "d3: $(leaf_row "$D/d3")"
run_fail "$CAIRN" pool detach tank "$D/d3"
expect_stderr "only a mirror's side can be detached"
run_fail "$CAIRN" pool attach tank "$D/d3" "$D/nonexistent"
verify_all
scrub_clean
pass "detach back to a single disk; the last disk cannot be detached"

run_ok "$CAIRN" pool export tank
check_clean tank "$D"
# The detached disks carry no label of tank any more: a new pool takes them without -f.
run_ok "$CAIRN" pool create other "$D/d1" "$D/d2"
run_ok "$CAIRN" pool destroy other
run_ok "$CAIRN" pool import -d "$D" tank
verify_all
pass "detached disks are free; tank checks clean and still reads back"
