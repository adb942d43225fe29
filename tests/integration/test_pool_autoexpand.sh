#!/usr/bin/env bash
# Growing vdevs whose devices grew (files made larger with truncate -s, as a resized LUN):
#  - autoexpand=off (the default): `pool list` shows EXPANDSZ once both sides of the
#    mirror grew, SIZE stays; `pool online -e` takes the space; data and check stay clean.
#  - autoexpand=on (persisted across export/import): the pool grows by itself; a raidz1
#    grows only once its smallest leaf grew.
#  - the back labels moved to the new end: with the front labels of a leaf destroyed the
#    pool still imports from them, and the exported pool checks clean.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

MIB=1048576
# col POOL N: column N of `pool list -H -p POOL` (2 SIZE, 8 EXPANDSZ).
col() {
    run_ok "$CAIRN" pool list -H -p "$1"
    cut -f"$2" "$LAST_STDOUT"
}
# wait_col POOL N OP VALUE: polls until column N compares so (the pool looks at its
# devices about every txg_timeout); fails after 30 s.
wait_col() {
    local i v
    for i in $(seq 1 300); do
        v=$(col "$1" "$2")
        [ "$v" "$3" "$4" ] && return 0
        sleep 0.1
    done
    fail "pool $1 column $2 is $v, want $3 $4"
}

sparse_files "$T/d" 256M a b r1 r2 r3
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank mirror "$T/d/a" "$T/d/b"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/fs
URL=$(nfs_url /tank/fs)
nfs_client "$URL" fill before $((64 * MIB))
s0=$(col tank 2)
[ "$(col tank 8)" = 0 ] || fail "EXPANDSZ of a new pool: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool get -H autoexpand tank
grep -q "autoexpand	off	default" "$LAST_STDOUT" || fail "autoexpand default: $(cat "$LAST_STDOUT")"

# One side grown: a mirror is as big as its smaller side.
truncate -s 512M "$T/d/a"
sleep 7 # more than a txg_timeout: the pool looked at its devices
[ "$(col tank 8)" = 0 ] || fail "EXPANDSZ with one side of the mirror grown: $(cat "$LAST_STDOUT")"
truncate -s 512M "$T/d/b"
wait_col tank 8 -ge $((240 * MIB))
[ "$(col tank 2)" = "$s0" ] || fail "autoexpand=off and the pool grew: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool list tank
grep -q "256M" "$LAST_STDOUT" || fail "EXPANDSZ not shown as 256M: $(cat "$LAST_STDOUT")"
pass "autoexpand=off: EXPANDSZ shows the grown space once both sides grew, SIZE stays"

run_ok "$CAIRN" pool online -e tank "$T/d/a"
s1=$(col tank 2)
[ "$s1" -ge $((s0 + 240 * MIB)) ] || fail "online -e: size $s0 -> $s1"
[ "$(col tank 8)" = 0 ] || fail "EXPANDSZ after online -e: $(cat "$LAST_STDOUT")"
avail=$("$CAIRN" get -H -p -o value available tank/fs)
[ "$avail" -ge $((s1 - 64 * MIB - 40 * MIB)) ] || fail "dataset available $avail after growing to $s1"
nfs_client "$URL" fill after $((300 * MIB)) # more than the pool held before
pass "online -e grows the mirror by the new space (size $s0 -> $s1); 300 MiB more written"

run_ok "$CAIRN" pool set autoexpand=on tank
run_ok "$CAIRN" pool export tank
check_clean tank "$T/d"
run_ok "$CAIRN" pool import -d "$T/d" tank
run_ok "$CAIRN" pool get -H autoexpand tank
grep -q "autoexpand	on	local" "$LAST_STDOUT" || fail "autoexpand after import: $(cat "$LAST_STDOUT")"
truncate -s 640M "$T/d/a" "$T/d/b"
wait_col tank 2 -ge $((s1 + 120 * MIB))
[ "$(col tank 8)" = 0 ] || fail "EXPANDSZ with autoexpand=on: $(cat "$LAST_STDOUT")"
s2=$(col tank 2)
pass "autoexpand=on survives export/import and grows the pool by itself ($s1 -> $s2)"

# The new end holds the labels: without the front ones the pool still imports.
run_ok "$CAIRN" pool export tank
corrupt_front_labels "$T/d/a"
check_clean tank "$T/d"
run_ok "$CAIRN" pool import -d "$T/d" tank
[ "$(col tank 2)" = "$s2" ] || fail "size after import: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool scrub tank
wait_scrub tank
grep -q "errors: No known data errors" "$LAST_STDOUT" || fail "scrub after growth: $(cat "$LAST_STDOUT")"
pass "labels at the grown end: import without the front labels, scrub clean"

# raidz1: the smallest leaf governs.
run_ok "$CAIRN" pool create -o autoexpand=on rz raidz1 "$T/d/r1" "$T/d/r2" "$T/d/r3"
z0=$(col rz 2)
truncate -s 384M "$T/d/r1" "$T/d/r2"
sleep 7
[ "$(col rz 2)" = "$z0" ] || fail "raidz1 grew with one leaf still small: $(cat "$LAST_STDOUT")"
truncate -s 384M "$T/d/r3"
wait_col rz 2 -ge $((z0 + 3 * 112 * MIB))
z1=$(col rz 2)
daemon_kill9
wait_unlocked "$T/d/r1"
nfs_daemon_start d1
[ "$(col rz 2)" = "$z1" ] || fail "raidz1 size after kill -9: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool export rz
check_clean rz "$T/d"
pass "raidz1 grows only when its smallest leaf grew ($z0 -> $z1); kept across kill -9; check clean"
