#!/usr/bin/env bash
# NFSv4.0 through libnfs's client against cairnd: its tools (nfs-ls on the pseudo-root
# and on a share, nfs-cp, nfs-cat), a file written over NFSv3 read back over NFSv4 in
# 1 MiB READs, a sparse file past 4 GiB and 32 clients at once (tests/tools/nfs_client.c
# over v4), and a libnfs C program (tests/tools/nfs4_client.c) for the operations
# and their errors, byte-range lock conflicts between two client processes as LOCK and
# LOCKT see them, a removed file still read through its open, EACCES for another user,
# EROFS on a read-only share and a share this client may not use. The client records that make a grace
# period possible are on disk while a client holds state. The NFSv4.1 operations
# libnfs cannot send are in test_nfs41_rpc.sh.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

C4="$CAIRN_BIN/nfs4_client"
sparse_files "$T/dev" 4G a
daemon_start d1
nfs_ports d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
run_ok "$CAIRN" create -o sharenfs=ro,no_root_squash tank/ro
run_ok "$CAIRN" create -o sharenfs=rw=@10.0.0.0/8 tank/other
expect_share /tank/share
url4() { echo "nfs://127.0.0.1$1?nfsport=$NFS_PORT&version=4${2:-}"; }

# ---- libnfs's tools ----
run_ok nfs-ls "$(url4 /tank)"
expect_stdout 'share'
grep -q 'other' "$LAST_STDOUT" && fail "the pseudo-root shows a share this client may not use"
head -c 3000 /dev/urandom >"$T/small"
run_ok nfs-cp "$T/small" "$(url4 /tank/share/small)"
run_ok nfs-cp "$(url4 /tank/share/small)" "$T/small.back"
cmp "$T/small" "$T/small.back" || fail "nfs-cp v4 round trip differs"
echo "hello over nfs4" >"$T/hello"
run_ok nfs-cp "$T/hello" "$(url4 /tank/share/hello)"
run_ok nfs-cat "$(url4 /tank/share/hello)"
[ "$(cat "$LAST_STDOUT")" = "hello over nfs4" ] || fail "nfs-cat: $(cat "$LAST_STDOUT")"
run_ok nfs-ls "$(url4 /tank/share)"
expect_stdout 'hello'
pass "nfs-ls (pseudo-root and share), nfs-cp, nfs-cat over NFSv4"

# Big file: written over NFSv3, read over NFSv4 (1 MiB READs).
head -c 6M /dev/urandom >"$T/big"
run_ok nfs-cp "$T/big" "$(nfs_url /tank/share/big)"
run_ok nfs-cp "$(url4 /tank/share/big)" "$T/big.back"
cmp "$T/big" "$T/big.back" || fail "a file written over v3 reads back differently over v4"
pass "6 MiB written over NFSv3 reads back identical over NFSv4"

# Past 4 GiB, and many clients: nfs_client's modes over v4 (small WRITEs, 1 MiB READs).
nfs_client "$(url4 /tank/share)" big
pass "a sparse file past 4 GiB over NFSv4: writes and 1 MiB reads at offsets beyond 4 GiB, a hole, EOF"
# Each connection of nfs_client is a client of its own, so the server must have
# recorded 32 more of them (records go only when a lease runs out, 90 s away).
recs="$T/d1/nfs/nfs4-clients"
prefix=$(printf 'cairn-nfs-client-' | od -An -tx1 | tr -d ' \n')
before=$(grep -c "^$prefix" "$recs" || true)
nfs_client "$(url4 /tank/share)" concurrent 32
after=$(grep -c "^$prefix" "$recs" || true)
[ "$after" -eq $((before + 32)) ] || fail "32 clients at once left $((after - before)) client records, not 32"
pass "32 NFSv4 clients at once, each its own clientid: opens, writes, reads, closes verified"

# ---- operations and errors ----
run_ok "$C4" "$(url4 /tank/share)" basic
run_ok "$C4" "$(url4 /tank/share)" removed-open
pass "create/write/append/truncate/rename/link/symlink/readdir/remove, EEXIST/ENOENT/ENOTEMPTY, a removed file read through its open"

# /hello belongs to root, mode 0644: uid 1000 may read it, not write it.
run_ok "$C4" "$(url4 /tank/share '&uid=1000&gid=1000')" expect-errno /hello w 13
run_ok "$C4" "$(url4 /tank/ro)" expect-errno /new c 30
if "$C4" "$(url4 /tank/other)" basic 2>"$T/other.err"; then fail "a refused client used /tank/other"; fi
grep -q 'NFS4ERR_ACCESS' "$T/other.err" || fail "refused share: $(cat "$T/other.err")"
pass "EACCES for another user, EROFS on a read-only share, refused share"

# ---- byte-range locks between two clients ----
# Bash unsets HOLDER and HOLDER_PID as soon as it reaps the coprocess, which can happen
# before `wait` runs: keep the pid and the descriptors in our own variables.
coproc HOLDER { "$C4" "$(url4 /tank/share)" lock-hold /locked; }
holder_pid=$HOLDER_PID holder_out=${HOLDER[0]} holder_in=${HOLDER[1]}
read -r -t 30 line <&"$holder_out" || fail "the lock holder did not report"
[ "$line" = locked ] || fail "lock holder said: $line"
[ -s "$recs" ] || fail "no client records in $recs while a client holds state"
run_ok "$C4" "$(url4 /tank/share)" lock-try /locked
exec {holder_in}>&-
wait "$holder_pid" || fail "the lock holder failed"
pass "a lock conflicts across clients for LOCK and LOCKT, other ranges do not; client records on disk"

daemon_stop

