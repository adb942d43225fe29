#!/usr/bin/env bash
# A hostile initiator on raw sockets (tests/tools/iscsi_badpdu.c): garbage instead of
# a login, an unknown opcode, an oversized data segment, a command beyond the CmdSN
# window, wrong header and data digests, Data-Out at the wrong offset. Each gets a
# Reject or a closed connection as RFC 7143 asks, while a well-behaved session
# (iscsi_client) writes and verifies data at the same time, and the daemon lives on.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CLIENT="$CAIRN_BIN/iscsi_client"
BAD="$CAIRN_BIN/iscsi_badpdu"
TGT=iqn.2026-11.org.cairn.test:bad
PORT=$(cairn_random_port)
P=127.0.0.1:$PORT

sparse_files "$T/dev" 2G a
daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -V 64M tank/vol
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" tank/vol

# The good session runs throughout.
"$CLIENT" write "$P" "$TGT" 5 3000 2 >"$T/good.log" 2>&1 &
good=$!

for c in garbage badopcode oversize cmdsn hdigest ddigest baddata garbage oversize; do
    rc=0
    timeout 60 "$BAD" 127.0.0.1 "$PORT" "$TGT" "$c" || rc=$?
    [ "$rc" -eq 0 ] || fail "hostile case '$c': the target misbehaved (rc $rc)"
    kill -0 "$DAEMON_PID" 2>/dev/null || fail "cairnd died on case '$c'"
    pass "hostile case $c"
done

wait "$good" || fail "the well-behaved session failed: $(cat "$T/good.log")"
"$CLIENT" verify "$P" "$TGT" 5 3000 || fail "data of the well-behaved session"
pass "another session kept working"
