#!/usr/bin/env bash
# `pool add` of data vdevs on a live pool.
#  1. A mirror pool filled to ~90% over NFS gets a second mirror while an NFS client
#     keeps writing FILE_SYNC records: the writer goes on, the new mirror takes most of
#     the data written after the add (per-vdev alloc of `pool iostat -v`), size grows by
#     exactly the new vdev's capacity, `pool status` and `pool list -v` show it, every
#     acknowledged record verifies, and the exported pool checks clean and imports
#     again with the data.
#  2. raidz2 added to a raidz2 pool: size and dataset avail grow by the data share
#     (deflated); a mirror forced in beside them: a file's `used` is its size wherever
#     its blocks landed; check clean.
#  3. Refusals: mismatched redundancy without -f (accepted with -f), a device in use by
#     another pool, a device already in this pool, a missing path, a too small device,
#     and -n, which prints the layout and changes nothing.
#  4. kill -9 of the daemon around the add: the pool comes back with or without the new
#     vdev, whole either way, and checks clean.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

MIB=1048576

# top_alloc POOL VDEV: allocated bytes of top-level vdev VDEV ("mirror-1").
top_alloc() {
    run_ok "$CAIRN" pool iostat -v -H -p "$1"
    awk -F'\t' -v n="$2" '$1 == n { print $3; found = 1 } END { exit !found }' "$LAST_STDOUT" ||
        fail "no iostat row for $2: $(cat "$LAST_STDOUT")"
}
pool_size() {
    run_ok "$CAIRN" pool list -H -p "$1"
    cut -f2 "$LAST_STDOUT"
}

# ---------------------------------------------------------------- 1. under NFS load
sparse_files "$T/m" 384M a b c d
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank mirror "$T/m/a" "$T/m/b"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/fs
URL=$(nfs_url /tank/fs)
size0=$(pool_size tank)

# ~90% full: incompressible files until alloc passes 88% of size (the slop, 1/32,
# and the intent log's region keep the last few percent from a dataset).
i=0
while :; do
    run_ok "$CAIRN" pool list -H -p tank
    alloc=$(cut -f3 "$LAST_STDOUT")
    [ "$alloc" -ge $((size0 * 88 / 100)) ] && break
    "$NFSCLIENT" "$URL" fill "pre$i" $((4 * MIB)) >"$LAST_STDOUT" 2>"$LAST_STDERR" ||
        fail "filling the pool stopped at $alloc of $size0 bytes: $(cat "$LAST_STDOUT" "$LAST_STDERR")"
    i=$((i + 1))
done
echo "filled: alloc $alloc of $size0 bytes"

# A FILE_SYNC writer runs across the add.
"$NFSCLIENT" "$URL" syncwrite live >"$T/acks" 2>"$T/writer.err" &
WRITER=$!
wait_records() { # wait_records N: until N more records were acknowledged
    local want=$(( $(wc -l <"$T/acks") + $1 )) k
    for k in $(seq 1 3000); do
        [ "$(wc -l <"$T/acks")" -ge "$want" ] && return 0
        kill -0 "$WRITER" 2>/dev/null || fail "NFS writer died: $(cat "$T/writer.err")"
        sleep 0.02
    done
    fail "NFS writer made no progress: $(wc -l <"$T/acks") records"
}
wait_records 20
old0=$(top_alloc tank mirror-0)
run_ok "$CAIRN" pool add tank mirror "$T/m/c" "$T/m/d"
before_add=$(wc -l <"$T/acks")
wait_records 200
kill "$WRITER"
wait "$WRITER" 2>/dev/null || true
nrec=$(wc -l <"$T/acks")
run_ok "$CAIRN" pool status tank
grep -q "mirror-1" "$LAST_STDOUT" || fail "pool status lacks the new mirror: $(cat "$LAST_STDOUT")"
grep -q "$T/m/d" "$LAST_STDOUT" || fail "pool status lacks the new leaf: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool list -v -H -p tank
awk -F'\t' '$1 == "mirror-1" && $2 > 300 * 1048576 { found = 1 } END { exit !found }' "$LAST_STDOUT" ||
    fail "pool list -v lacks the new mirror's capacity: $(cat "$LAST_STDOUT")"
size1=$(pool_size tank)
[ "$size1" -ge $((size0 * 19 / 10)) ] || fail "pool size $size1 after adding a mirror like the first ($size0)"
# The pool grew by exactly the new vdev's capacity, and the old one's is unchanged.
run_ok "$CAIRN" pool list -v -H -p tank
vdev_size() { awk -F'\t' -v n="$1" '$1 == n { print $2 }' "$LAST_STDOUT"; }
[ "$(vdev_size mirror-0)" = "$size0" ] && [ $((size1 - size0)) = "$(vdev_size mirror-1)" ] ||
    fail "size $size0 -> $size1 is not the old vdev's plus the new one's: $(cat "$LAST_STDOUT")"
# The writer's records after the add and more data: where did they land?
new0=0
"$NFSCLIENT" "$URL" fill post $((48 * MIB)) >"$LAST_STDOUT" 2>"$LAST_STDERR" ||
    fail "writing after the add: $(cat "$LAST_STDOUT" "$LAST_STDERR")"
pool_synced tank # the txg with the file's data
old1=$(top_alloc tank mirror-0)
new1=$(top_alloc tank mirror-1)
d_old=$((old1 - old0)); d_new=$((new1 - new0))
echo "after the add: old mirror +$d_old bytes, new mirror +$d_new bytes"
[ "$d_new" -ge $((48 * MIB)) ] || fail "the new mirror took only $d_new bytes of the 60+ MiB written"
[ "$d_new" -gt $((d_old * 3)) ] || fail "new writes not mostly on the new mirror: old +$d_old, new +$d_new"
[ "$nrec" -gt "$before_add" ] || fail "no record acknowledged after the add"
nfs_client "$URL" verify live "$nrec"
pass "mirror added to a 90%-full mirror pool under NFS FILE_SYNC writes: $nrec records, new vdev took $d_new of $((d_new + d_old)) new bytes"

run_ok "$CAIRN" pool export tank
check_clean tank "$T/m"
run_ok "$CAIRN" pool import -d "$T/m" tank
run_ok "$CAIRN" pool status tank
grep -q "mirror-1" "$LAST_STDOUT" || fail "the new mirror is gone after export/import"
nfs_client "$URL" verify live "$nrec"
[ "$(pool_size tank)" = "$size1" ] || fail "size changed across export/import"
pass "export, check clean, import: the added mirror stays and every record verifies"

# ---------------------------------------------------------------- 3. refusals, -n
sparse_files "$T/r" 256M x y z w other
truncate -s 16M "$T/r/tiny"
run_ok "$CAIRN" pool create other "$T/r/other"
snapshot() {
    run_ok "$CAIRN" pool status tank
    sed -e '/scan:/d' "$LAST_STDOUT" >"$T/status.$1"
    run_ok "$CAIRN" pool list -H -p tank
    cut -f1,2 "$LAST_STDOUT" >>"$T/status.$1"
}
unchanged() {
    snapshot after
    cmp -s "$T/status.before" "$T/status.after" ||
        fail "$1 changed the pool: $(diff "$T/status.before" "$T/status.after")"
}
refuse() { # refuse MESSAGE CMD...
    local msg=$1; shift
    run_fail "$@"
    expect_stderr "$msg"
    [ "$(wc -l <"$LAST_STDERR")" = 1 ] || fail "more than one line: $(cat "$LAST_STDERR")"
    unchanged "$*"
}
snapshot before
refuse "mismatched replication level: pool uses a 2-way mirror and new vdev is a single disk" \
    "$CAIRN" pool add tank "$T/r/x"
refuse "pool uses a 2-way mirror and new vdev is a 3-way mirror" \
    "$CAIRN" pool add tank mirror "$T/r/x" "$T/r/y" "$T/r/z"
refuse "pool uses a 2-way mirror and new vdev is a 3-wide raidz1" \
    "$CAIRN" pool add tank raidz1 "$T/r/x" "$T/r/y" "$T/r/z"
refuse "device is in use by another pool" "$CAIRN" pool add tank mirror "$T/r/x" "$T/r/other"
refuse "is already in pool 'tank'" "$CAIRN" pool add tank mirror "$T/r/x" "$T/m/a"
refuse "cannot open" "$CAIRN" pool add tank mirror "$T/r/x" "$T/r/nothere"
refuse "too small" "$CAIRN" pool add tank mirror "$T/r/x" "$T/r/tiny"
refuse "mismatched replication level" "$CAIRN" pool add -n tank "$T/r/x"
run_ok "$CAIRN" pool add -n tank mirror "$T/r/x" "$T/r/y"
expect_stdout "would update 'tank' to the following configuration"
grep -A2 -P '^\t  mirror$' "$LAST_STDOUT" | grep -q "$T/r/y" ||
    fail "-n does not show the new mirror: $(cat "$LAST_STDOUT")"
grep -q "mirror-1" "$LAST_STDOUT" || fail "-n does not show the existing vdevs: $(cat "$LAST_STDOUT")"
unchanged "pool add -n"
pass "refusals (mismatch, in use, in this pool, missing, too small) and -n change nothing"

run_ok "$CAIRN" pool add -f tank "$T/r/x"
run_ok "$CAIRN" pool status tank
grep -q "$T/r/x" "$LAST_STDOUT" || fail "-f did not add the single disk"
pass "a mismatched single disk is added with -f"
run_ok "$CAIRN" pool destroy other
run_ok "$CAIRN" pool destroy tank

# ---------------------------------------------------------------- 2. raidz2 to raidz2
sparse_files "$T/z" 256M r1 r2 r3 r4 r5 r6 r7 r8
run_ok "$CAIRN" pool create rz raidz2 "$T/z/r1" "$T/z/r2" "$T/z/r3" "$T/z/r4"
run_ok "$CAIRN" create -o sharenfs=no_root_squash rz/fs
URL=$(nfs_url /rz/fs)
nfs_client "$URL" fill f1 $((64 * MIB))
pool_synced rz
zs0=$(pool_size rz)
avail0=$("$CAIRN" get -H -p -o value available rz)
run_ok "$CAIRN" pool add rz raidz2 "$T/z/r5" "$T/z/r6" "$T/z/r7" "$T/z/r8"
zs1=$(pool_size rz)
avail1=$("$CAIRN" get -H -p -o value available rz)
[ "$zs1" -ge $((zs0 * 19 / 10)) ] || fail "raidz2 pool size $zs0 -> $zs1"
# avail grows by about half the new vdev's raw size (raidz2 of 4: 2 data columns).
grow=$((avail1 - avail0))
[ "$grow" -ge $(( (zs1 - zs0) * 40 / 100 )) ] && [ "$grow" -le $(( (zs1 - zs0) * 55 / 100 )) ] ||
    fail "available grew by $grow for $((zs1 - zs0)) raw bytes of raidz2 (want about half)"
nfs_client "$URL" fill f2 $((64 * MIB))
pool_synced rz
run_ok "$CAIRN" pool status rz
grep -q "raidz2-1" "$LAST_STDOUT" || fail "no raidz2-1 in status: $(cat "$LAST_STDOUT")"
run_fail "$CAIRN" pool add rz raidz1 "$T/r/y" "$T/r/z" "$T/r/w"
expect_stderr "pool uses a 4-wide raidz2 and new vdev is a 3-wide raidz1"
# A mirror forced into the raidz2 pool: every vdev deflates its own way, so a file's
# `used` is its size wherever its blocks landed.
run_ok "$CAIRN" pool add -f rz mirror "$T/r/y" "$T/r/z"
used0=$("$CAIRN" get -H -p -o value used rz/fs)
nfs_client "$URL" fill f3 $((96 * MIB))
pool_synced rz
used1=$("$CAIRN" get -H -p -o value used rz/fs)
d=$((used1 - used0))
[ "$d" -ge $((95 * MIB)) ] && [ "$d" -le $((100 * MIB)) ] ||
    fail "96 MiB written over raidz2 and mirror vdevs counted $d bytes"
run_ok "$CAIRN" pool export rz
check_clean rz "$T/z"
run_ok "$CAIRN" pool import -d "$T/z" rz
pass "raidz2 added to a raidz2 pool: size x2, available +$grow; with a mirror forced in, 96 MiB count $d; check clean"
run_ok "$CAIRN" pool destroy rz

# ---------------------------------------------------------------- 4. kill -9 around the add
sparse_files "$T/k" 256M k1 k2 k3 k4 k5 k6 k7
run_ok "$CAIRN" pool create kp "$T/k/k1"
run_ok "$CAIRN" create -o sharenfs=no_root_squash kp/fs
nfs_client "$(nfs_url /kp/fs)" fill f $((32 * MIB))
n=2
for delay in 0 5 30 200; do
    "$CAIRN" pool add kp "$T/k/k$n" >/dev/null 2>&1 &
    addpid=$!
    sleep_ms "$delay"
    daemon_kill9
    wait "$addpid" 2>/dev/null || true
    wait_unlocked "$T/k/k1"
    nfs_daemon_start d1
    run_ok "$CAIRN" pool status kp
    if grep -q "$T/k/k$n" "$LAST_STDOUT"; then got="with"; else got="without"; fi
    echo "kill -9 ${delay} ms into the add: the pool came back $got $T/k/k$n"
    nfs_client "$(nfs_url /kp/fs)" fill "g$n" $((8 * MIB))
    run_ok "$CAIRN" pool export kp
    check_clean kp "$T/k"
    run_ok "$CAIRN" pool import -d "$T/k" kp
    n=$((n + 1))
done
pass "kill -9 around pool add: the pool imports whole (with or without the new vdev), check clean"
