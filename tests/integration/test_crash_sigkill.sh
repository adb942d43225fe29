#!/usr/bin/env bash
# Crash consistency under SIGKILL.
#
# Part 1: a writer process (cairn_objtest crash-writer: one or two threads rewriting whole
# objects, each step stamped with its number and txg, a syncer printing "durable K"
# after dmu_objset_sync and "limit L" before writers may go past it) is killed with
# kill -9 after a random 0.2-2 s, many times, alternating a mirror pool and a raidz1
# pool. After every kill the pool must pass the offline `cairn check` (no bad block, no
# leaked or doubly allocated byte) and crash-verify: every object is whole, of a single
# version, at least as new as the last acknowledged durable step and never past the
# writers' limit. The next round imports the crashed pool again (force) and continues.
# Rounds: 8 normally, 120 with CAIRN_TEST_LONG=1 (or CAIRN_CRASH_ROUNDS).
#
# Part 2: the daemon is killed with kill -9 while a scrub runs; restarted, it brings the
# pool back by itself; a new scrub completes; after export, check and verify pass.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

rounds=${CAIRN_CRASH_ROUNDS:-8}
cairn_long && rounds=${CAIRN_CRASH_ROUNDS:-120}
seed=$((RANDOM * 32768 + RANDOM))
echo "seed $seed, $rounds rounds"

sparse_files "$T/cm" 256M a b
sparse_files "$T/cr" 256M a b c
daemon_start d1
run_ok "$CAIRN" pool create crashm mirror "$T/cm/a" "$T/cm/b"
run_ok "$CAIRN" pool create crashr raidz1 "$T/cr/a" "$T/cr/b" "$T/cr/c"
run_ok "$CAIRN" pool export crashm
run_ok "$CAIRN" pool export crashr

# Per pool: the last "durable K" and "limit L" any round printed (they only grow).
declare -A durable=() limit=()

# A clean run first: a writer that stops by itself after 200 steps and exports leaves
# every object at exactly its last step (durable = limit = the last step).
for pool in crashm crashr; do
    dir="$T/cm"; [ "$pool" = crashr ] && dir="$T/cr"
    objtest crash-writer "$dir" "$pool" --seed "$seed" --max-steps 200
    durable[$pool]=$(sed -n 's/^durable //p' "$LAST_STDOUT" | tail -n 1)
    limit[$pool]=${durable[$pool]}
    objtest crash-verify "$dir" "$pool" --seed "$seed" --durable "${durable[$pool]}" --limit "${limit[$pool]}"
    check_clean "$pool" "$dir"
done
pass "clean writer runs leave every object at its last step"
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) -eq 1 ]; then pool=crashm dir="$T/cm"; else pool=crashr dir="$T/cr"; fi
    out="$T/writer.$r.out"
    # One or two writer threads (crash-verify's txg-order check holds for both).
    threads=$(((r / 2) % 2 + 1))
    "$OBJTEST" crash-writer -d "$dir" "$pool" --seed "$seed" --threads "$threads" >"$out" 2>"$T/writer.$r.err" &
    wpid=$!
    ms=$((200 + RANDOM % 1801))
    sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
    kill -0 "$wpid" 2>/dev/null || fail "round $r: the writer died by itself: $(grep -m1 -A30 -E "ERROR: |runtime error" "$T/writer.$r.err" || tail -n 20 "$T/writer.$r.err")"
    kill -9 "$wpid"
    wait "$wpid" 2>/dev/null || true
    # See wait_unlocked: the dead writer's io_uring teardown still holds the leaves.
    wait_unlocked "$dir"/*
    k=$(sed -n 's/^durable //p' "$out" | tail -n 1)
    l=$(sed -n 's/^limit //p' "$out" | tail -n 1)
    [ -n "$k" ] && durable[$pool]=$k
    [ -n "$l" ] && limit[$pool]=$l
    check_clean "$pool" "$dir"
    objtest crash-verify "$dir" "$pool" --seed "$seed" --durable "${durable[$pool]}" --limit "${limit[$pool]}"
    echo "round $r: $pool, $threads writers, killed after ${ms} ms: $(cat "$LAST_STDOUT")"
    rm -f "$out" "$T/writer.$r.err"
done
# The writers must have made progress, or the rounds proved nothing.
for pool in crashm crashr; do
    [ "${durable[$pool]}" -gt 100 ] || fail "$pool: writers made little progress (durable ${durable[$pool]})"
done
pass "$rounds SIGKILL rounds: every pool checked clean and kept every durable step"

# The crashed pools import read-write in the daemon (force: they were never exported),
# export cleanly and still verify.
for pool in crashm crashr; do
    dir="$T/cm"; [ "$pool" = crashr ] && dir="$T/cr"
    run_fail "$CAIRN" pool import -d "$dir" "$pool"
    run_ok "$CAIRN" pool import -f -d "$dir" "$pool"
    run_ok "$CAIRN" pool status "$pool"
    expect_stdout '^ state: ONLINE$'
    run_ok "$CAIRN" pool export "$pool"
    check_clean "$pool" "$dir"
    objtest crash-verify "$dir" "$pool" --seed "$seed" --durable "${durable[$pool]}" --limit "${limit[$pool]}"
done
pass "crashed pools import in the daemon and export cleanly"

# ---- part 2: the daemon killed during a scrub
objopts=(--objects 8 --size 8M --compress off --recordsize 32K)
objtest write "$T/cm" crashm --seed "$seed" "${objopts[@]}"
run_ok "$CAIRN" pool import -d "$T/cm" crashm
scrub_rounds=3; cairn_long && scrub_rounds=20
for r in $(seq 1 "$scrub_rounds"); do
    run_ok "$CAIRN" pool scrub crashm
    ms=$((RANDOM % 300))
    sleep "0.$(printf '%03d' "$ms")"
    run_ok "$CAIRN" pool status crashm
    state=$(grep 'scan:' "$LAST_STDOUT")
    daemon_kill9
    wait_unlocked "$T"/cm/*
    daemon_start d1
    run_ok "$CAIRN" pool list -H crashm
    expect_stdout '^crashm	.*ONLINE	-$'
    echo "scrub round $r: killed after $ms ms ($state); pool back after restart"
done
run_ok "$CAIRN" pool scrub crashm
wait_scrub crashm
grep -q 'with 0 errors' "$LAST_STDOUT" || fail "scrub after crashes: $(cat "$LAST_STDOUT")"
[ "$(scrub_repaired)" = 0 ] || fail "scrub after crashes repaired data: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool export crashm
check_clean crashm "$T/cm"
objtest verify "$T/cm" crashm --seed "$seed" "${objopts[@]}"
pass "daemon killed during scrub: pool returns, scrubs clean, checks clean, verifies"
daemon_stop
