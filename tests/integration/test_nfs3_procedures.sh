#!/usr/bin/env bash
# NFSv3 through real clients: libnfs's tools (nfs-cp, nfs-ls, nfs-cat) and a libnfs C
# program that drives every procedure and error case (ENOENT, EEXIST, ENOTEMPTY,
# ENOTDIR, EISDIR, permission errors for another uid, stale handles), a sparse file past
# 4 GiB with 1 MiB transfers, and 32 clients at once; a raw RPC prober checks what
# libnfs hides (FSINFO sizes, EXCLUSIVE create verifiers, NOT_SYNC, TOOSMALL,
# BAD_COOKIE, COMMIT verifier, BADHANDLE, STALE, BADTYPE), MOUNT and the portmapper.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

sparse_files "$T/dev" 8G a
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
expect_share /tank/share

# ---- libnfs's tools ----
echo "hello over nfs" >"$T/hello.txt"
run_ok nfs-cp "$T/hello.txt" "$(nfs_url /tank/share/hello.txt)"
run_ok nfs-cat "$(nfs_url /tank/share/hello.txt)"
[ "$(cat "$LAST_STDOUT")" = "hello over nfs" ] || fail "nfs-cat: $(cat "$LAST_STDOUT")"
run_ok nfs-ls "$(nfs_url /tank/share)"
expect_stdout 'hello.txt'
head -c 5M /dev/urandom >"$T/rand"
run_ok nfs-cp "$T/rand" "$(nfs_url /tank/share/rand)"
run_ok nfs-cp "$(nfs_url /tank/share/rand)" "$T/rand.back"
cmp "$T/rand" "$T/rand.back" || fail "nfs-cp round trip differs"
pass "nfs-cp, nfs-cat, nfs-ls"

# ---- every procedure, error cases, big files, concurrency ----
URL=$(nfs_url /tank/share)
nfs_client "$URL" basic
nfs_client "$URL" errors
nfs_client "$URL" big
pass "procedures, error cases, file past 4 GiB with 1 MiB transfers"
nfs_client "$URL" concurrent 32
pass "32 concurrent clients"

# ---- raw protocol ----
nfs_rpc /tank/share rpc
nfs_rpc /tank/share proto
pass "RPC replies, MOUNT, portmapper, NFSv3 details"

# ---- root squash (the default): root is nobody and cannot write the root dir ----
nfs_client "$URL" put public.txt "for everyone"
run_ok "$CAIRN" set sharenfs=on tank/share
if "$NFSCLIENT" "$URL" put squashed.txt data >"$LAST_STDOUT" 2>&1; then
    fail "root_squash: squashed root created a file in a 0755 root directory"
fi
grep -q 'ACCES' "$LAST_STDOUT" || fail "root_squash: expected NFS3ERR_ACCES: $(cat "$LAST_STDOUT")"
nfs_client "$URL" get public.txt
[ "$(cat "$LAST_STDOUT")" = "for everyone" ] || fail "squashed read: $(cat "$LAST_STDOUT")"
if "$NFSCLIENT" "$URL" get hello.txt >"$LAST_STDOUT" 2>&1; then
    fail "root_squash: nobody read root's 0660 file"
fi
pass "root_squash"
