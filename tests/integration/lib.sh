# Shared helpers for Cairn's integration tests (bash; source me after `set -euo pipefail`).
#
# Environment (set by ctest): CAIRN_BIN (build dir with cairnd and cairn), CAIRN_SRC
# (source tree), CAIRN_TEST_TMP (scratch root). Each test gets its own directory
# $T under CAIRN_TEST_TMP; daemons started here get their own state dir, socket and
# ports, so several tests (and daemons) run side by side. Everything is stopped and
# removed on exit.

: "${CAIRN_BIN:?CAIRN_BIN must point at the build directory}"
: "${CAIRN_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${CAIRN_TEST_TMP:=/tmp}"
CAIRND="$CAIRN_BIN/cairnd"
CAIRN="$CAIRN_BIN/cairn"

mkdir -p "$CAIRN_TEST_TMP"
T=$(mktemp -d "$CAIRN_TEST_TMP/$(basename "$0" .sh).XXXXXX")
CAIRN_DAEMON_PIDS=()
LAST_STDERR="$T/last.stderr"
LAST_STDOUT="$T/last.stdout"

cairn_test_cleanup() {
    local rc=$?
    local pid
    for pid in "${CAIRN_DAEMON_PIDS[@]}"; do
        kill -9 "$pid" 2>/dev/null || true
    done
    if [ "$rc" -ne 0 ]; then
        echo "--- test failed (rc=$rc); daemon logs:" >&2
        tail -n 30 "$T"/*/cairnd.log "$T"/*.daemon.log >&2 2>/dev/null || true
    fi
    rm -rf "$T"
    exit "$rc"
}
trap cairn_test_cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# A random base port, so side-by-side daemons never collide on their (future) listeners.
cairn_random_port() { echo $(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 )); }

# daemon_start NAME [extra cairnd args...]: starts cairnd in the foreground (background
# job) on state dir $T/NAME; sets CAIRN_SOCKET and DAEMON_PID; waits until it answers.
daemon_start() {
    local name=$1; shift
    local state="$T/$name"
    mkdir -p "$state"
    local p; p=$(cairn_random_port)
    export CAIRN_SOCKET="$state/cairnd.sock"
    "$CAIRND" --foreground --state-dir "$state" --socket "$CAIRN_SOCKET" \
        --nfs-listen "127.0.0.1:$p" --mount-listen "127.0.0.1:$((p + 1))" \
        --portmap-listen "127.0.0.1:$((p + 2))" --iscsi-listen "127.0.0.1:$((p + 3))" \
        "$@" 2>>"$T/$name.daemon.log" &
    DAEMON_PID=$!
    CAIRN_DAEMON_PIDS+=("$DAEMON_PID")
    daemon_wait "$DAEMON_PID"
}

# daemon_wait PID: waits (up to 60 s) until the daemon at $CAIRN_SOCKET answers.
daemon_wait() {
    local pid=$1 i
    for i in $(seq 1 600); do
        if ! kill -0 "$pid" 2>/dev/null; then
            fail "cairnd (pid $pid) exited during start-up"
        fi
        if [ -S "$CAIRN_SOCKET" ] && "$CAIRN" pool list >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.1
    done
    fail "cairnd at $CAIRN_SOCKET did not answer within 60 s"
}

# daemon_stop [PID]: SIGTERM and wait for a clean exit (status 0).
daemon_stop() {
    local pid=${1:-$DAEMON_PID} rc=0
    kill -TERM "$pid"
    wait "$pid" || rc=$?
    [ "$rc" -eq 0 ] || fail "cairnd (pid $pid) exited with $rc on SIGTERM"
}

# daemon_kill9 [PID]: simulate a crash.
daemon_kill9() {
    local pid=${1:-$DAEMON_PID}
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
}

# sparse_files DIR SIZE NAME...: creates sparse files of SIZE (truncate syntax).
sparse_files() {
    local dir=$1 size=$2; shift 2
    mkdir -p "$dir"
    local f
    for f in "$@"; do truncate -s "$size" "$dir/$f"; done
}

# run_ok CMD...: runs, requires exit 0; stdout in $LAST_STDOUT.
run_ok() {
    if ! "$@" >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "expected success: $* -> $(cat "$LAST_STDERR")"
    fi
}

# run_fail CMD...: requires non-zero exit and exactly one stderr line starting "cairn: ".
run_fail() {
    local rc=0
    "$@" >"$LAST_STDOUT" 2>"$LAST_STDERR" || rc=$?
    [ "$rc" -ne 0 ] || fail "expected failure: $*"
    local n; n=$(wc -l <"$LAST_STDERR")
    [ "$n" -eq 1 ] || fail "expected one stderr line from: $* (got $n): $(cat "$LAST_STDERR")"
    grep -q '^cairn: ' "$LAST_STDERR" || fail "stderr of '$*' lacks 'cairn: ': $(cat "$LAST_STDERR")"
}

# expect_stderr PATTERN: the last command's stderr matches the extended regex.
expect_stderr() {
    grep -Eq -- "$1" "$LAST_STDERR" || fail "stderr '$(cat "$LAST_STDERR")' does not match /$1/"
}
# expect_stdout PATTERN
expect_stdout() {
    grep -Eq -- "$1" "$LAST_STDOUT" || fail "stdout does not match /$1/: $(cat "$LAST_STDOUT")"
}

# checksums FILE...: one line per file, for before/after comparisons.
checksums() { cksum "$@"; }
