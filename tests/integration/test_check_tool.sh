#!/usr/bin/env bash
# cairn-check, the offline checker as a program of its own (src/check/): run
# directly it checks an exported pool with no daemon, reports damage it cannot
# repair, and refuses bad words with one line; `cairn check` runs it (found
# beside cairn, else on PATH) after refusing a pool the daemon holds; and the
# cairn CLI links none of the engine.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CHECK="$CAIRN_BIN/cairn-check"

# check_fail CMD...: non-zero exit, exactly one stderr line starting "cairn-check: ".
check_fail() {
    local rc=0
    "$@" >"$LAST_STDOUT" 2>"$LAST_STDERR" || rc=$?
    [ "$rc" -ne 0 ] || fail "expected failure: $*"
    [ "$(wc -l <"$LAST_STDERR")" -eq 1 ] || fail "expected one stderr line from: $*: $(cat "$LAST_STDERR")"
    grep -q '^cairn-check: ' "$LAST_STDERR" || fail "stderr of '$*' lacks 'cairn-check: ': $(cat "$LAST_STDERR")"
}

sparse_files "$T/p" 128M a
daemon_start d1
run_ok "$CAIRN" pool create chk "$T/p/a"
run_fail "$CAIRN" check -d "$T/p" chk;       expect_stderr 'imported by cairnd'
run_ok "$CAIRN" pool export chk
daemon_stop
objtest write "$T/p" chk --objects 4 --size 2M --compress lz4
pass "a pool with data, exported"

run_ok "$CHECK" -d "$T/p" chk
expect_stdout '^pool: +chk$'
expect_stdout '^result: +clean$'
direct=$(cat "$LAST_STDOUT")
run_ok "$CAIRN" check -d "$T/p" chk
[ "$(cat "$LAST_STDOUT")" = "$direct" ] || fail "cairn check and cairn-check differ: $(cat "$LAST_STDOUT")"
pass "cairn-check and cairn check give the same clean report"

before=$(checksums "$T/p/a")
check_fail "$CHECK" chk;                      expect_stderr 'give -d DIR'
check_fail "$CHECK" -d "$T/p";                expect_stderr 'give the pool name'
check_fail "$CHECK" -d "$T/p" chk other;      expect_stderr 'one pool at a time'
check_fail "$CHECK" -d "$T/p" -x chk;         expect_stderr 'unknown option'
check_fail "$CHECK" -d "$T/nodir" chk;        expect_stderr "search directory '.*nodir'"
check_fail "$CHECK" -d "$T/p" 'b@d';          expect_stderr 'b@d'
check_fail "$CHECK" -d "$T/p" nosuchpool;     expect_stderr "check of 'nosuchpool' failed"
[ "$(checksums "$T/p/a")" = "$before" ] || fail "a refused check changed the device"
pass "bad words: one line each, nothing changed"

# cairn looks beside itself first, then on PATH; with neither, one line.
mkdir -p "$T/bin"
cp "$CAIRN" "$T/bin/cairn"
PATH="$CAIRN_BIN:$PATH" run_ok "$T/bin/cairn" check -d "$T/p" chk
expect_stdout '^result: +clean$'
PATH=/usr/bin:/bin run_fail "$T/bin/cairn" check -d "$T/p" chk
expect_stderr 'cannot run cairn-check'
pass "cairn check finds cairn-check on PATH, and says so when it cannot"

# Damage without redundancy: the report says ERRORS and the exit is non-zero.
n=$(corrupt_data "$T/p/a" 20 7)
[ "$n" -gt 0 ] || fail "nothing corrupted"
rc=0
"$CHECK" -d "$T/p" chk >"$LAST_STDOUT" 2>"$LAST_STDERR" || rc=$?
[ "$rc" -ne 0 ] || fail "cairn-check passed a damaged pool: $(cat "$LAST_STDOUT")"
expect_stdout '^result: +ERRORS$'
grep -Eq '^bad blocks: +[1-9]' "$LAST_STDOUT" || fail "no bad blocks reported: $(cat "$LAST_STDOUT")"
expect_stderr "^cairn-check: check of 'chk' failed"
rc=0
"$CAIRN" check -d "$T/p" chk >"$LAST_STDOUT" 2>"$LAST_STDERR" || rc=$?
[ "$rc" -ne 0 ] || fail "cairn check passed a damaged pool"
expect_stdout '^result: +ERRORS$'
expect_stderr "^cairn: check of 'chk' failed"   # the CLI's one-line contract
pass "damage: ERRORS, bad blocks counted, non-zero exit (both ways)"

# The CLI is a thin client: none of the engine is linked into it.
if command -v nm >/dev/null; then
    engine=$(nm "$CAIRN" | grep -E ' [TDBR] (spa|dmu|dsl|zap|zil|arc|vdev|metaslab|dnode|objset)_' | head -n 3 || true)
    [ -z "$engine" ] || fail "cairn links engine symbols: $engine"
    nm "$CHECK" | grep ' T spa_check$' >/dev/null || fail "cairn-check does not hold spa_check"
    pass "cairn links none of the engine; cairn-check does"
fi
