#!/usr/bin/env bash
# Large sync writes through the intent log under SIGKILL.
#
# cairn_fszil writer --large: threads doing 64 KiB FUA writes on a volume (16 KiB
# volblocksize) and 128 KiB ZPL_IO_SYNC writes on files (128 KiB records), half of
# them record-aligned, plus the namespace thread; every acknowledged 4 KiB block is
# appended to a side file. Large writes are logged as pointers to blocks written
# directly to the main vdevs (logbias=throughput always; logbias=latency when the
# pool has no log device), their edges as copies. The writer is killed with kill -9
# at a random moment; txg_timeout is 300 s, so what it acknowledged is mostly in the
# log, while the dirty-data trigger syncs some txgs mid-round (blocks adopted by the
# sync, or freed because their record changed again).
#
# After every kill: `cairn check` of the crashed pool passes (blocks named only by
# unreplayed records are neither allocated nor counted), then cairn_fszil verify
# imports the pool (claiming those blocks), replays, requires every acknowledged
# block, exports and checks; `cairn check` passes again (each claimed block freed
# exactly once). Two pools: without a log device (both logbias values use pointers)
# and with one (only throughput does; latency copies, which the test also asserts).
# Rounds per pool: 4 normally, 24 with CAIRN_TEST_LONG=1 (or CAIRN_CRASH_ROUNDS).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

FSZIL="$CAIRN_BIN/cairn_fszil"
rounds=${CAIRN_CRASH_ROUNDS:-4}
cairn_long && rounds=${CAIRN_CRASH_ROUNDS:-24}

sparse_files "$T/p" 256M a b c
sparse_files "$T/q" 256M a b log
daemon_start d1
run_ok "$CAIRN" pool create -o txg_timeout=300 zili mirror "$T/p/a" "$T/p/b"
run_ok "$CAIRN" pool create -o txg_timeout=300 zill mirror "$T/q/a" "$T/q/b" log "$T/q/log"
run_ok "$CAIRN" pool export zili
run_ok "$CAIRN" pool export zill
daemon_stop

fszil() {
    local dir=$1 pool=$2 mode=$3; shift 3
    if ! "$FSZIL" "$mode" -d "$dir" "$pool" --ack "$T/acks.$pool" --large "$@" \
        >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "cairn_fszil $mode $pool $*: $(grep -v ' INFO ' "$LAST_STDERR" | tail -n 5) $(tail -n 5 "$LAST_STDOUT")"
    fi
}

# replayed_blocks: records replayed from directly written blocks in the last verify.
replayed_blocks() {
    grep -o 'of them from directly written blocks' -B0 "$LAST_STDERR" >/dev/null || { echo 0; return; }
    sed -n 's/.*replayed [0-9]* record(s), \([0-9]*\) of them from directly written blocks.*/\1/p' \
        "$LAST_STDERR" | awk '{s += $1} END {print s + 0}'
}

run_pool() {
    local dir=$1 pool=$2 has_log=$3
    : >"$T/acks.$pool"
    fszil "$dir" "$pool" writer --round 1 --max-ops 200 --logbias latency
    fszil "$dir" "$pool" verify
    pass "$pool: clean run: $(cat "$LAST_STDOUT")"
    local pointer_rounds=0 replay_rounds=0 r
    for r in $(seq 2 $((rounds + 1))); do
        local bias=latency
        [ $((r % 2)) = 1 ] && bias=throughput
        local out="$T/writer.$pool.$r.out"
        "$FSZIL" writer -d "$dir" "$pool" --ack "$T/acks.$pool" --large --round "$r" \
            --logbias "$bias" >"$out" 2>"$T/writer.$pool.$r.err" &
        local wpid=$!
        # Kill only once the writers are under way (some acknowledged writes), then at a
        # random moment.
        local acks0 i
        acks0=$(wc -l <"$T/acks.$pool")
        for i in $(seq 1 3000); do
            [ "$(wc -l <"$T/acks.$pool")" -gt $((acks0 + 64)) ] && break
            kill -0 "$wpid" 2>/dev/null || break
            sleep 0.01
        done
        local ms=$((RANDOM % 1000))
        sleep_ms "$ms"
        kill -0 "$wpid" 2>/dev/null ||
            fail "$pool round $r: the writer died by itself: $(grep -v ' INFO ' "$T/writer.$pool.$r.err" | tail -n 20)"
        kill -9 "$wpid"
        wait "$wpid" 2>/dev/null || true
        wait_unlocked "$dir"/*
        check_clean "$pool" "$dir"     # crashed, log not replayed
        fszil "$dir" "$pool" verify
        # A txg may have synced everything just before the kill: counted, not required.
        grep -q ' zil: .*replayed [1-9]' "$LAST_STDERR" && replay_rounds=$((replay_rounds + 1))
        local nb
        nb=$(replayed_blocks)
        echo "$pool round $r (logbias=$bias): killed ${ms} ms into the writes: $nb records replayed from direct blocks; $(cat "$LAST_STDOUT")"
        if [ "$has_log" = 1 ] && [ "$bias" = latency ] && [ "$nb" -ne 0 ]; then
            fail "$pool round $r: with a log device and logbias=latency, writes must be copied into the log"
        fi
        [ "$nb" -gt 0 ] && pointer_rounds=$((pointer_rounds + 1))
        check_clean "$pool" "$dir"     # replayed, exported
    done
    [ "$replay_rounds" -gt 0 ] || fail "$pool: no import replayed anything: the test proved nothing"
    [ "$pointer_rounds" -gt 0 ] || fail "$pool: no round replayed a directly written block: the test proved nothing"
    local acked
    acked=$(grep -c '^[VF] ' "$T/acks.$pool")
    [ "$acked" -gt 2000 ] || fail "$pool: the writers acknowledged little ($acked blocks)"
    pass "$pool: $rounds SIGKILL rounds, $pointer_rounds replayed pointer records; every acknowledged block survived; check clean"
}

run_pool "$T/p" zili 0
run_pool "$T/q" zill 1
