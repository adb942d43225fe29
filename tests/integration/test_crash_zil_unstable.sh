#!/usr/bin/env bash
# Unstable writes made durable by a later commit, under SIGKILL.
#
# cairn_fszil writer --large --unstable: as NFS UNSTABLE writes + COMMIT (and iSCSI
# writes + SYNCHRONIZE CACHE): threads write 128 KiB to files without ZPL_IO_SYNC
# and 64 KiB to a volume without FUA, and every third write calls zpl_fsync /
# zvol_flush; only then are those writes' 4 KiB blocks appended to the ack file.
# Without a log device such large file writes are not copied into the log: the
# commit writes their records as blocks the txg adopts and logs pointers to them
# (or, a record changed since or its txg closing, waits for the txg); volume writes
# are barriers, their flush waits for the txg. The namespace thread keeps
# logging records meanwhile. The writer is killed with kill -9 at a random moment
# (txg_timeout 300 s, so only commits and the dirty-data trigger sync txgs).
#
# After every kill: `cairn check` of the crashed pool passes; cairn_fszil verify
# imports it (replaying the log), requires every acknowledged block to hold its
# acknowledged write or a later one, exports and checks; `cairn check` passes again.
# Rounds: 4 normally, 24 with CAIRN_TEST_LONG=1 (or CAIRN_CRASH_ROUNDS).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

FSZIL="$CAIRN_BIN/cairn_fszil"
rounds=${CAIRN_CRASH_ROUNDS:-4}
cairn_long && rounds=${CAIRN_CRASH_ROUNDS:-24}

sparse_files "$T/p" 256M a b
daemon_start d1
run_ok "$CAIRN" pool create -o txg_timeout=300 zilu mirror "$T/p/a" "$T/p/b"
run_ok "$CAIRN" pool export zilu
daemon_stop

dir=$T/p
pool=zilu
fszil() {
    local mode=$1; shift
    if ! "$FSZIL" "$mode" -d "$dir" "$pool" --ack "$T/acks" --large --unstable "$@" \
        >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "cairn_fszil $mode $*: $(grep -v ' INFO ' "$LAST_STDERR" | tail -n 5) $(tail -n 5 "$LAST_STDOUT")"
    fi
}

: >"$T/acks"
fszil writer --round 1 --max-ops 120
fszil verify
pass "clean run: $(cat "$LAST_STDOUT")"
for r in $(seq 2 $((rounds + 1))); do
    out="$T/writer.$r.out"
    "$FSZIL" writer -d "$dir" "$pool" --ack "$T/acks" --large --unstable --round "$r" \
        >"$out" 2>"$T/writer.$r.err" &
    wpid=$!
    # Kill only once commits have been acknowledged, then at a random moment.
    acks0=$(wc -l <"$T/acks")
    for i in $(seq 1 3000); do
        [ "$(wc -l <"$T/acks")" -gt $((acks0 + 256)) ] && break
        kill -0 "$wpid" 2>/dev/null || break
        sleep 0.01
    done
    ms=$((RANDOM % 1000))
    sleep_ms "$ms"
    kill -0 "$wpid" 2>/dev/null ||
        fail "round $r: the writer died by itself: $(grep -v ' INFO ' "$T/writer.$r.err" | tail -n 20)"
    kill -9 "$wpid"
    wait "$wpid" 2>/dev/null || true
    wait_unlocked "$dir"/*
    check_clean "$pool" "$dir"     # crashed, log not replayed
    fszil verify
    echo "round $r: killed ${ms} ms into the writes; $(cat "$LAST_STDOUT")"
    check_clean "$pool" "$dir"     # replayed, exported
done
acked=$(grep -c '^[VF] ' "$T/acks")
[ "$acked" -gt 2000 ] || fail "the writers acknowledged little ($acked blocks)"
pass "$rounds SIGKILL rounds after commits of unstable writes; all $acked acknowledged blocks survived; check clean"
