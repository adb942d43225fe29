#!/usr/bin/env bash
# NFSv4.2 (RFC 7862) through a raw client (tests/integration/nfs42_rpc.py):
# SEEK, ALLOCATE, DEALLOCATE, READ_PLUS and COPY with their error cases; the same
# operations refused on a read-only export; minor versions 0 and 1 not knowing
# them. Hole punching gives space back: a file of 8 MiB of random bytes, punched
# whole, makes the dataset's `used` fall by at least 7 MiB once the txg syncs
# (polled, bounded). A punch survives kill -9: on a pool whose txgs sync every
# 300 s, a file written, punched and ALLOCATEd (each acknowledged, so in the
# intent log only) comes back after the crash with its hole, its bytes and its size.
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
pass "SEEK, READ_PLUS, ALLOCATE, DEALLOCATE, COPY and their errors; CLONE/OFFLOAD NOTSUPP; not in 4.0/4.1"

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

daemon_stop
