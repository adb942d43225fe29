#!/usr/bin/env bash
# Host names in sharenfs client lists: a name that does not resolve is refused at
# `cairn set` / `cairn create` with one line (nothing changes); a resolvable one
# (localhost) admits the client at its address, rw or ro as listed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

sparse_files "$T/dev" 2G a
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/fs
expect_share /tank/fs
nfs_client "$(nfs_url /tank/fs)" put ro-probe "probe
"

run_fail "$CAIRN" set sharenfs=rw=no-such-host.invalid,no_root_squash tank/fs
expect_stderr "no-such-host.invalid.*does not resolve"
expect_prop sharenfs tank/fs no_root_squash
run_fail "$CAIRN" set sharenfs=rw=@10.0.0.0/8:no-such-host.invalid tank/fs
expect_stderr "does not resolve"
run_fail "$CAIRN" create -o sharenfs=ro=no-such-host.invalid tank/fs2
expect_stderr "^cairn: cannot create 'tank/fs2': .*does not resolve"
run_fail "$CAIRN" list tank/fs2
nfs_client "$(nfs_url /tank/fs)" get ro-probe
pass "a host name that does not resolve: one-line refusal, nothing changed"

run_ok "$CAIRN" set sharenfs=rw=@10.0.0.0/8:localhost,no_root_squash tank/fs
nfs_client "$(nfs_url /tank/fs)" put via-name.txt "named"
nfs_client "$(nfs_url /tank/fs)" get via-name.txt
[ "$(cat "$LAST_STDOUT")" = named ] || fail "read back: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" set sharenfs=rw=@10.0.0.0/8,ro=localhost,no_root_squash tank/fs
nfs_client "$(nfs_url /tank/fs)" rofs
run_ok "$CAIRN" set sharenfs=rw=@10.0.0.0/8,no_root_squash tank/fs
nfs_client "$(nfs_url /tank/fs)" denied
pass "localhost in a client list admits 127.0.0.1 (rw or ro as listed); without it, refused"
