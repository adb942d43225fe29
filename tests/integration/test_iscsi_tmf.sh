#!/usr/bin/env bash
# Task management with commands outstanding (tests/tools/iscsi_tmf.c): ABORT TASK,
# ABORT TASK SET, CLEAR TASK SET, LOGICAL UNIT RESET and TARGET WARM RESET, each sent
# while writes of two sessions wait for their data. The answer is FUNCTION COMPLETE,
# exactly the tasks the function covers are aborted (none of their data is written,
# no status comes back, late data for them is dropped), the others complete, a reset
# leaves BUS DEVICE RESET, and both the session and the daemon go on working. Then
# large READs in flight with a Logout or ABORT TASK SET right behind them: every READ
# that answers does so in full, with the right data, before the answer.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

TMF="$CAIRN_BIN/iscsi_tmf"
CLIENT="$CAIRN_BIN/iscsi_client"
TGT=iqn.2026-11.org.cairn.test:tmf
PORT=$(cairn_random_port)
P=127.0.0.1:$PORT

sparse_files "$T/dev" 1G a
daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -s -V 64M tank/lun
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" tank/lun

for f in abort-task abort-task-set clear-task-set lun-reset warm-reset reads-logout reads-abort-task-set; do
    "$TMF" 127.0.0.1 "$PORT" "$TGT" "$f" >"$T/out.$f" 2>&1 || {
        cat "$T/out.$f"
        fail "$f"
    }
    cat "$T/out.$f"
    kill -0 "$DAEMON_PID" 2>/dev/null || fail "cairnd died during $f"
done
# Other initiators are served as before.
"$CLIENT" write "$P" "$TGT" 7 64 2 || fail "data written and read back after the task management"
pass "task management with commands outstanding"
