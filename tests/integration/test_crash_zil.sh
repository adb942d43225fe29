#!/usr/bin/env bash
# Intent log under SIGKILL.
#
# A writer (cairn_fszil writer: volume writes with FUA, file writes with ZPL_IO_SYNC,
# creates / renames / removes each followed by zpl_commit, all on several threads)
# appends every acknowledged operation to a side file and is killed with kill -9 at a
# random moment, many times. txg_timeout is 300 s, so almost nothing it acknowledged
# is in a synced txg: it is all in the intent log. After every kill, cairn_fszil
# verify imports the pool (mount and open replay the log) and requires every
# acknowledged block and name to be there, no block torn or older, then exports and
# runs the offline check; `cairn check` must pass as well. The next round writes on.
# Rounds: 6 normally, 60 with CAIRN_TEST_LONG=1 (or CAIRN_CRASH_ROUNDS).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

FSZIL="$CAIRN_BIN/cairn_fszil"
rounds=${CAIRN_CRASH_ROUNDS:-6}
cairn_long && rounds=${CAIRN_CRASH_ROUNDS:-60}

sparse_files "$T/p" 256M a b
daemon_start d1
run_ok "$CAIRN" pool create -o txg_timeout=300 zilc mirror "$T/p/a" "$T/p/b"
run_ok "$CAIRN" pool export zilc
daemon_stop
ack="$T/acks"
: >"$ack"

fszil() {
    local mode=$1; shift
    if ! "$FSZIL" "$mode" -d "$T/p" zilc --ack "$ack" "$@" >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "cairn_fszil $mode $*: $(grep -v ' INFO ' "$LAST_STDERR" | tail -n 5) $(tail -n 5 "$LAST_STDOUT")"
    fi
}

# A clean run that stops by itself: everything verifies, the log is empty after export.
fszil writer --round 1 --max-ops 300
fszil verify
pass "clean run: $(cat "$LAST_STDOUT")"

for r in $(seq 2 $((rounds + 1))); do
    out="$T/writer.$r.out"
    "$FSZIL" writer -d "$T/p" zilc --ack "$ack" --round "$r" >"$out" 2>"$T/writer.$r.err" &
    wpid=$!
    for i in $(seq 1 500); do grep -q ready "$out" 2>/dev/null && break; sleep 0.02; done
    ms=$((300 + RANDOM % 1200))
    sleep_ms "$ms"
    kill -0 "$wpid" 2>/dev/null || fail "round $r: the writer died by itself: $(grep -v ' INFO ' "$T/writer.$r.err" | tail -n 20)"
    kill -9 "$wpid"
    wait "$wpid" 2>/dev/null || true
    wait_unlocked "$T/p"/a "$T/p"/b
    fszil verify
    # The point of the test: what was acknowledged came back through the log.
    grep -q ' zil: .*replayed [1-9]' "$LAST_STDERR" || fail "round $r: the import replayed nothing"
    echo "round $r: killed after ${ms} ms: $(cat "$LAST_STDOUT")"
    check_clean zilc "$T/p"
done
acked=$(grep -c '^[VF] ' "$ack")
[ "$acked" -gt 500 ] || fail "the writers acknowledged little ($acked writes): the rounds proved nothing"
pass "$rounds SIGKILL rounds: every acknowledged sync write, create, rename and remove survived; check clean"
