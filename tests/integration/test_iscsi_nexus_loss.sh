#!/usr/bin/env bash
# I_T nexus loss happens before the initiator can observe the session's end. A
# Logout Response means the session's SPC-2 reservation is already released, so
# another session's RESERVE right after it succeeds (libiscsi's Reserve6.Logout,
# which flaked in CI when the release ran later, in the connection's teardown).
# CAIRN_ISCSI_TEARDOWN_DELAY_MS makes that teardown slow on purpose, the way a
# loaded machine does now and then: the order must not depend on timing.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

command -v iscsi-test-cu >/dev/null || fail "iscsi-test-cu is not installed (tools/install-deps installs libiscsi-bin)"

TGT=iqn.2026-11.org.cairn.test:nexusloss
PORT=$(cairn_random_port)
sparse_files "$T/dev" 1G a
CAIRN_ISCSI_TEARDOWN_DELAY_MS=1500 daemon_start d1 --iscsi-listen "127.0.0.1:$PORT"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -s -V 64M tank/lun
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" tank/lun
URL="iscsi://127.0.0.1:$PORT/$TGT/0"

for t in SCSI.Reserve6.Logout SCSI.Reserve6.2Initiators SCSI.Reserve6.Logout; do
    out="$T/out.$t"
    rc=0
    timeout 120 iscsi-test-cu --dataloss -t "$t" "$URL" >"$out" 2>&1 || rc=$?
    read -r _ total ran passed nfail _ < <(grep -E '^ +tests ' "$out" | tail -n 1) || true
    if [ "$rc" -ne 0 ] || [ "${ran:-0}" -ne 1 ] || [ "${nfail:-1}" -ne 0 ]; then
        cat "$out"
        fail "$t failed (rc $rc, ran ${ran:-?}, failed ${nfail:-?})"
    fi
done
kill -0 "$DAEMON_PID" 2>/dev/null || fail "cairnd died"
pass "a logout releases the nexus's reservation before its response"
