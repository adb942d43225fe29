#!/usr/bin/env bash
# Intent-log records of namespace and attribute operations under SIGKILL.
#
# A library writer (cairn_fsnslog writer: three threads, each making a random but
# reproducible sequence of creates, EXCLUSIVE creates, mkdirs, symlinks, removes,
# rmdirs, renames across directories and over existing files, links, setattrs,
# truncates and writes in its own directories, each followed by zpl_commit) records
# every acknowledged operation and the handle of every node it created, and is killed
# with kill -9 at a random moment, many times. txg_timeout is 300 s, so what it
# acknowledged is in the intent log, not in a synced txg. After every kill,
# cairn_fsnslog verify imports the pool (mounting replays the log) and requires every
# directory of every round to be exactly its model after the last acknowledged
# operation or after the one in flight - names, types, modes, owners, link counts,
# sizes, bytes, symlink targets, shared nodes - with the handles of acknowledged
# creates resolving (stale once freed); its offline check and `cairn check` must pass.
# Rounds: 5 normally, 50 with CAIRN_TEST_LONG=1 (or CAIRN_CRASH_ROUNDS).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

NSLOG="$CAIRN_BIN/cairn_fsnslog"
rounds=${CAIRN_CRASH_ROUNDS:-5}
cairn_long && rounds=${CAIRN_CRASH_ROUNDS:-50}

sparse_files "$T/p" 256M a b
daemon_start d1
run_ok "$CAIRN" pool create -o txg_timeout=300 zilns mirror "$T/p/a" "$T/p/b"
run_ok "$CAIRN" pool export zilns
daemon_stop
ack="$T/acks"
: >"$ack"

verify() {
    if ! "$NSLOG" verify -d "$T/p" zilns --ack "$ack" >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "cairn_fsnslog verify: $(grep -v ' INFO ' "$LAST_STDERR" | tail -n 5) $(tail -n 5 "$LAST_STDOUT")"
    fi
}

replayed_rounds=0
for r in $(seq 1 "$rounds"); do
    out="$T/writer.$r.out"
    "$NSLOG" writer -d "$T/p" zilns --ack "$ack" --round "$r" >"$out" 2>"$T/writer.$r.err" &
    wpid=$!
    for i in $(seq 1 500); do grep -q ready "$out" 2>/dev/null && break; sleep 0.02; done
    ms=$((400 + RANDOM % 1200))
    sleep_ms "$ms"
    kill -0 "$wpid" 2>/dev/null || fail "round $r: the writer died by itself: $(grep -v ' INFO ' "$T/writer.$r.err" | tail -n 20)"
    kill -9 "$wpid"
    wait "$wpid" 2>/dev/null || true
    wait_unlocked "$T/p"/a "$T/p"/b
    verify
    # The point of the test: what was acknowledged came back through the log. A round
    # may replay nothing when the kill lands just after the log filled up and the
    # writers waited for a txg instead (as they must), so most rounds, not all, must.
    replay=$(grep -o ' zil: .*replayed [0-9]*' "$LAST_STDERR" | grep -o '[0-9]*$' | tail -n 1 || true)
    [ "${replay:-0}" -gt 0 ] && replayed_rounds=$((replayed_rounds + 1))
    echo "round $r: killed after ${ms} ms: replayed ${replay:-0} records: $(cat "$LAST_STDOUT")"
    check_clean zilns "$T/p"
done
[ $((replayed_rounds * 2)) -gt "$rounds" ] ||
    fail "only $replayed_rounds of $rounds imports replayed records: the kills did not test the log"
acked=$(grep -c '^A ' "$ack")
[ "$acked" -gt 200 ] || fail "the writers acknowledged little ($acked operations): the rounds proved nothing"
pass "$rounds SIGKILL rounds: $acked acknowledged namespace, attribute and data operations survived exactly; check clean"
