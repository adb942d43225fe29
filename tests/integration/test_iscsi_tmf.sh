#!/usr/bin/env bash
# Task management with commands outstanding (tests/tools/iscsi_tmf.c): ABORT TASK,
# ABORT TASK SET, CLEAR TASK SET, LOGICAL UNIT RESET and TARGET WARM RESET, each sent
# while writes of two sessions wait for their data. The answer is FUNCTION COMPLETE,
# exactly the tasks the function covers are aborted (none of their data is written,
# no status comes back, late data for them is dropped), the others complete, a reset
# leaves BUS DEVICE RESET, and both the session and the daemon go on working. Then
# large READs in flight with a Logout or ABORT TASK SET right behind them: every READ
# that answers does so in full, with the right data, before the answer. Last, 128 KiB
# writes with 32 in flight all answered, and their data on the LUN.
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

# 128 KiB WRITEs, 32 in flight, their data immediate: the reader holds replies back
# while the next command is already there (src/iscsi, send_pdu) and must send them
# before it would block, or the initiator, its window spent, waits for ever. Every
# write is answered GOOD in time, and what they wrote is on the LUN.
out=$(timeout 60 "$CAIRN_BIN/iscsi_writeperf" "$P" "$TGT" 0 256 32 2) ||
    fail "128 KiB writes with 32 in flight did not all complete (rc $?)"
bytes=$(awk '{print $6}' <<<"$out")
"$CLIENT" dump "$P" "$TGT" "$T/lun.img" || fail "dump after the 128 KiB writes"
python3 - "$T/lun.img" "$bytes" <<'PY' || fail "the 128 KiB writes' data"
import sys
img, written = open(sys.argv[1], "rb").read(), int(sys.argv[2])
n = min(written, len(img))  # the writer starts at LBA 0 and wraps at the end
want = bytes((k * 31 + 7) & 255 for k in range(256)) * (n // 256)
assert n >= 1 << 20 and img[:n] == want, f"{n} bytes written, content differs"
PY
pass "128 KiB writes, 32 in flight: all answered, data on the LUN ($out)"
