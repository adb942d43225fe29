#!/usr/bin/env bash
# Log devices: `pool create ... log DEV|log mirror DEV DEV`, shown under "logs" in
# `pool status`; the intent log lives there (a crashed writer's acknowledged sync
# operations replay from it); an import without a log device is refused with a
# message naming it, and `import -m` imports without it (with a warning), after
# which the pool still checks clean.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

FSZIL="$CAIRN_BIN/cairn_fszil"
sparse_files "$T/p" 256M a b c
sparse_files "$T/l" 128M l1 l2
daemon_start d1

run_fail "$CAIRN" pool create bad "$T/p/a" log raidz1 "$T/l/l1" "$T/l/l2" "$T/p/c"
expect_stderr "a log vdev is a device or a mirror"
run_fail "$CAIRN" pool create bad "$T/p/a" log
expect_stderr "'log' must be followed"

run_ok "$CAIRN" pool create -o txg_timeout=300 zl mirror "$T/p/a" "$T/p/b" log mirror "$T/l/l1" "$T/l/l2"
grep -q 'log vdev 1 holds' "$T/d1.daemon.log" || fail "no intent-log region on the log vdev"
run_ok "$CAIRN" pool status zl
grep -q '^	logs$' "$LAST_STDOUT" || fail "no logs heading: $(cat "$LAST_STDOUT")"
grep -A3 '^	logs$' "$LAST_STDOUT" | grep -q "$T/l/l2" || fail "log device not under logs: $(cat "$LAST_STDOUT")"
# Log devices add no capacity.
run_ok "$CAIRN" pool list -H -p zl
size=$(cut -f2 "$LAST_STDOUT")
[ "$size" -lt $((300 * 1024 * 1024)) ] || fail "pool size $size counts the log devices"
run_ok "$CAIRN" pool export zl
pass "create with a log mirror, status shows it under logs"

ack="$T/acks"
: >"$ack"
fszil() {
    local mode=$1; shift
    if ! "$FSZIL" "$mode" -d "$T/p" -d "$T/l" zl --ack "$ack" "$@" >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "cairn_fszil $mode $*: $(grep -v ' INFO ' "$LAST_STDERR" | tail -n 5)"
    fi
}
# wait_writes N: until the writer ($wpid) had N more operations acknowledged, so the
# kill leaves something to replay (a fixed pause after its "ready" was no promise of
# that on a loaded machine).
wait_writes() {
    local want=$(( $(wc -l <"$ack") + $1 )) i
    for i in $(seq 1 3000); do
        [ "$(wc -l <"$ack")" -ge "$want" ] && return 0
        kill -0 "$wpid" 2>/dev/null || fail "writer died: $(grep -v ' INFO ' "$T/w.err" | tail -n 5)"
        sleep 0.02
    done
    fail "the writer had $(wc -l <"$ack") operations acknowledged, no progress in 60 s"
}
for r in 1 2; do
    "$FSZIL" writer -d "$T/p" -d "$T/l" zl --ack "$ack" --round "$r" >"$T/w.out" 2>"$T/w.err" &
    wpid=$!
    wait_writes 64
    kill -0 "$wpid" 2>/dev/null || fail "writer died: $(grep -v ' INFO ' "$T/w.err" | tail -n 5)"
    kill -9 "$wpid"
    wait "$wpid" 2>/dev/null || true
    wait_unlocked "$T/p"/a "$T/p"/b "$T/l"/l1 "$T/l"/l2
    fszil verify
    ! grep -q 'intent-log region grown' "$T/w.err" "$LAST_STDERR" || fail "the log went to the main vdevs"
    grep -q ' zil: .*replayed [1-9]' "$LAST_STDERR" || fail "round $r: nothing replayed"
    echo "round $r: $(cat "$LAST_STDOUT")"
done
check_clean zl "$T/p" "$T/l"
pass "acknowledged sync operations replay from the log mirror after kill -9"

# A crash, then both log devices gone.
"$FSZIL" writer -d "$T/p" -d "$T/l" zl --ack "$ack" --round 3 >"$T/w.out" 2>"$T/w.err" &
wpid=$!
wait_writes 64
kill -9 "$wpid"
wait "$wpid" 2>/dev/null || true
wait_unlocked "$T/p"/a "$T/p"/b "$T/l"/l1 "$T/l"/l2
mkdir -p "$T/gone"
mv "$T/l/l1" "$T/l/l2" "$T/gone/"
run_fail "$CAIRN" pool import -f -d "$T/p" zl
expect_stderr "log device"
expect_stderr "with -m"
run_ok "$CAIRN" pool import -f -m -d "$T/p" zl
grep -q "importing without log device" "$T/d1.daemon.log" || fail "no warning about the dropped log"
run_ok "$CAIRN" pool status zl
grep -q 'DEGRADED' "$LAST_STDOUT" || fail "pool with a missing log device not DEGRADED: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool export zl
check_clean zl "$T/p"
pass "missing log device: import refused naming it; -m imports without it; check clean"
