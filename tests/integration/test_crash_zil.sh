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
    local rc=0
    "$FSZIL" "$mode" -d "$T/p" zilc --ack "$ack" "$@" >"$LAST_STDOUT" 2>"$LAST_STDERR" || rc=$?
    if [ "$rc" -ne 0 ]; then
        # The whole tail, INFO lines too: a sanitizer or abort() may leave nothing else.
        fail "cairn_fszil $mode $* exited $rc: $(tail -n 40 "$LAST_STDERR") $(tail -n 5 "$LAST_STDOUT")"
    fi
}

# A clean run that stops by itself: everything verifies, the log is empty after export.
fszil writer --round 1 --max-ops 300
fszil verify
pass "clean run: $(cat "$LAST_STDOUT")"

replay_rounds=0
for r in $(seq 2 $((rounds + 1))); do
    out="$T/writer.$r.out"
    "$FSZIL" writer -d "$T/p" zilc --ack "$ack" --round "$r" >"$out" 2>"$T/writer.$r.err" &
    wpid=$!
    # Kill only once the writers are under way (some acknowledged operations), then at
    # a random moment.
    acks0=$(wc -l <"$ack")
    for i in $(seq 1 3000); do
        [ "$(wc -l <"$ack")" -gt $((acks0 + 64)) ] && break
        kill -0 "$wpid" 2>/dev/null || break
        sleep 0.01
    done
    ms=$((RANDOM % 1200))
    sleep_ms "$ms"
    kill -0 "$wpid" 2>/dev/null || fail "round $r: the writer died by itself: $(grep -v ' INFO ' "$T/writer.$r.err" | tail -n 20)"
    kill -9 "$wpid"
    wait "$wpid" 2>/dev/null || true
    wait_unlocked "$T/p"/a "$T/p"/b
    fszil verify
    # The point of the test: what was acknowledged came back through the log. A txg may
    # have synced everything just before the kill (the log region running low kicks one),
    # so a round without replay is counted, not failed; most rounds must replay.
    grep -q ' zil: .*replayed [1-9]' "$LAST_STDERR" && replay_rounds=$((replay_rounds + 1))
    echo "round $r: killed ${ms} ms into the writes: $(cat "$LAST_STDOUT")"
    check_clean zilc "$T/p"
done
[ $((replay_rounds * 2)) -ge "$rounds" ] ||
    fail "only $replay_rounds of $rounds imports replayed anything: the rounds proved little"
acked=$(grep -c '^[VF] ' "$ack")
[ "$acked" -gt 500 ] || fail "the writers acknowledged little ($acked writes): the rounds proved nothing"
pass "$rounds SIGKILL rounds: every acknowledged sync write, create, rename and remove survived; check clean"
