#!/usr/bin/env bash
# NFSv4.2 (RFC 7862) through a raw client (tests/integration/nfs42_rpc.py):
# SEEK, ALLOCATE, DEALLOCATE, READ_PLUS and COPY with their error cases; the same
# operations refused on a read-only export; minor versions 0 and 1 not knowing
# them. CLONE and a COPY of a 64 MiB file share its blocks: the pool's alloc
# grows by less than 8 MiB each, bclonesaved and bcloneratio say so, the
# dataset's used grows by the file; removing the source and the clone keeps
# the blocks for the copy, removing it gives them back. Hole punching gives space back: a file of 8 MiB of random bytes, punched
# whole, makes the dataset's `used` fall by at least 7 MiB once the txg syncs
# (polled, bounded). A punch survives kill -9: on a pool whose txgs sync every
# 300 s, a file written, punched and ALLOCATEd (each acknowledged, so in the
# intent log only) comes back after the crash with its hole, its bytes and its size.
# Clones made before a kill -9 are there after it, and the exported pool, with
# shared blocks, checks clean (cairn-check).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

NFS42RPC="python3 $CAIRN_SRC/tests/integration/nfs42_rpc.py"
nfs42_rpc() {
    local exp=$1; shift
    if ! $NFS42RPC 127.0.0.1 "$NFS_PORT" "$exp" "$@" >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "nfs42_rpc.py $exp $*: $(cat "$LAST_STDERR")"
    fi
}

sparse_files "$T/dev" 1G a
sparse_files "$T/dev" 256M c
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/ro
expect_share /tank/share

nfs42_rpc /tank/share "ops-$$" ops
pass "SEEK, READ_PLUS, ALLOCATE, DEALLOCATE, COPY, CLONE and their errors; OFFLOAD NOTSUPP; not in 4.0/4.1"


nfs42_rpc /tank/ro "mk-$$" mkfile file
run_ok "$CAIRN" set sharenfs=ro,no_root_squash tank/ro
nfs42_rpc /tank/ro "ro-$$" rofs file
pass "ALLOCATE, DEALLOCATE, COPY on a read-only export: ROFS; SEEK and READ_PLUS work"

# ---- punching gives space back ----
nfs42_rpc /tank/share "fill-$$" fill big 8
used_at_least() {   # used_at_least BYTES: polls (bounded) until tank/share uses that much
    local i
    for i in $(seq 1 240); do
        [ "$(ds_get used tank/share)" -ge "$1" ] && return 0
        sleep 0.5
    done
    fail "tank/share never used $1 bytes (now $(ds_get used tank/share))"
}
used_at_least $((8 << 20))
before=$(ds_get used tank/share)
nfs42_rpc /tank/share "punch-$$" punch big 8
after=$(ds_get used tank/share)
[ $((before - after)) -ge $((7 << 20)) ] ||
    fail "DEALLOCATE of 8 MiB: tank/share used $before before, $after after"
pass "DEALLOCATE of 8 MiB: the file reads zeros, keeps its size, and used fell from $before to $after"

# ---- CLONE and COPY share blocks: the pool's allocated space does not grow ----
pool_alloc() { "$CAIRN" pool get -H -p alloc tank | cut -f3; }
pool_prop() { "$CAIRN" pool get -H -p "$1" tank | cut -f3; }
alloc_settles_below() {   # alloc_settles_below BYTES: polls (bounded) until alloc < BYTES
    local i
    for i in $(seq 1 240); do
        [ "$(pool_alloc)" -lt "$1" ] && return 0
        sleep 0.5
    done
    fail "tank's alloc never fell below $1 (now $(pool_alloc))"
}
alloc_reaches() {
    local i
    for i in $(seq 1 240); do
        [ "$(pool_alloc)" -ge "$1" ] && return 0
        sleep 0.5
    done
    fail "tank's alloc never reached $1 (now $(pool_alloc))"
}
# The baseline once the frees above are released: a remove's (DEALLOCATE's) space
# comes back only after the txgs its frees are deferred by, which an idle pool closes
# within a fraction of a second and a busy one at its own pace.
alloc_steady() {
    local i prev=-1 cur same=0
    for i in $(seq 1 120); do
        cur=$(pool_alloc)
        if [ "$cur" = "$prev" ]; then same=$((same + 1)); else same=0; fi
        [ "$same" -ge 3 ] && return 0
        prev=$cur
        sleep 0.5
    done
    fail "tank's alloc never settled (now $(pool_alloc))"
}
alloc_steady
a0=$(pool_alloc)
s0=$(pool_prop bclonesaved)   # what the ops above left shared
nfs42_rpc /tank/share "cl-$$" fill cbig 64
alloc_reaches $((a0 + (64 << 20)))
a1=$(pool_alloc)
u1=$(ds_get used tank/share)
nfs42_rpc /tank/share "cl-$$" clonefile cbig cclone
a2=$(pool_alloc)
[ $((a2 - a1)) -lt $((8 << 20)) ] || fail "CLONE of 64 MiB: alloc $a1 before, $a2 after"
used_at_least $((u1 + (64 << 20)))
nfs42_rpc /tank/share "cl-$$" copyfile cbig ccopy
a3=$(pool_alloc)
[ $((a3 - a1)) -lt $((8 << 20)) ] || fail "COPY of 64 MiB: alloc $a1 before, $a3 after"
saved=$(pool_prop bclonesaved)
[ $((saved - s0)) -ge $((128 << 20)) ] || fail "bclonesaved $s0 -> $saved after two clones of 64 MiB"
ratio=$(pool_prop bcloneratio)
awk -v r="${ratio%x}" 'BEGIN { exit !(r > 2.5 && r <= 3) }' || fail "bcloneratio $ratio"
pass "CLONE and COPY of a 64 MiB file: alloc $a1 -> $a2 -> $a3, bclonesaved $saved ($ratio), used $u1 -> $(ds_get used tank/share)"
nfs42_rpc /tank/share "cl-$$" remove cbig cclone
# Once the removals' frees ran, the table holds no extra reference any more.
for i in $(seq 1 240); do [ "$(pool_prop bclonesaved)" -le "$s0" ] && break; sleep 0.5; done
[ "$(pool_prop bclonesaved)" -le "$s0" ] || fail "bclonesaved $(pool_prop bclonesaved) after the removals"
a4=$(pool_alloc)
[ "$a4" -ge $((a1 - (8 << 20))) ] || fail "removing two of three references freed space: $a1 -> $a4"
nfs42_rpc /tank/share "cl-$$" remove ccopy
alloc_settles_below $((a1 - (56 << 20)))
pass "removing the source and one clone kept the blocks ($a4), removing the last gave them back ($(pool_alloc))"

# ---- a punch, and an ALLOCATE after it, survive kill -9 ----
# (A punch returns once its txg synced, so the freed space shows in the reply's
# attributes; the ALLOCATE after it is durable through the intent log, or through
# a txg that the punch's deferred frees let the pool sync meanwhile: which of the
# two carried it is timing, so only the outcome is checked.)
run_ok "$CAIRN" pool create -o txg_timeout=300 crash "$T/dev/c"
run_ok "$CAIRN" create -o sharenfs=no_root_squash crash/share
expect_share /crash/share
out="$T/punch.out"
$NFS42RPC 127.0.0.1 "$NFS_PORT" /crash/share "crash-$$" punch-crash f >"$out" 2>"$T/punch.err" &
cpid=$!
for i in $(seq 1 600); do grep -q punched "$out" 2>/dev/null && break; sleep 0.1; done
grep -q punched "$out" || fail "punch-crash: $(cat "$T/punch.err")"
daemon_kill9
kill "$cpid" 2>/dev/null || true
wait "$cpid" 2>/dev/null || true
nfs_daemon_start d1
expect_share /crash/share
nfs42_rpc /crash/share "crash-$$" punch-verify f
pass "after kill -9 the punched hole, the bytes around it and the ALLOCATEd size came back"

# ---- clones survive kill -9, and the pool checks clean with them ----
nfs42_rpc /crash/share "cc-$$" fill g 4
nfs42_rpc /crash/share "cc-$$" clonefile g gclone
nfs42_rpc /crash/share "cc-$$" clonefile gclone gclone2
daemon_kill9
nfs_daemon_start d1
expect_share /crash/share
nfs42_rpc /crash/share "cc-$$" samefile g gclone
nfs42_rpc /crash/share "cc-$$" samefile g gclone2
[ "$("$CAIRN" pool get -H -p bclonesaved crash | cut -f3)" -ge $((8 << 20)) ] ||
    fail "bclonesaved after the crash: $("$CAIRN" pool get -H -p bclonesaved crash)"
nfs42_rpc /crash/share "cc-$$" remove g
run_ok "$CAIRN" pool export crash
run_ok "$CAIRN_BIN/cairn-check" -d "$T/dev" crash
expect_stdout '^result: +clean$'
expect_stdout '^shared: +[1-9]'
pass "two clones of a 4 MiB file came back after kill -9; after removing the source the exported pool, its blocks shared by the two clones, checks clean ($(grep shared "$LAST_STDOUT"))"

daemon_stop
