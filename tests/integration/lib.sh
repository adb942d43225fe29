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
    # Clients still running in the background (writers a failed step left, which
    # would retry against a dead server for good and load the tests after us).
    for pid in $(jobs -p); do
        kill -9 "$pid" 2>/dev/null || true
    done
    if [ "$rc" -ne 0 ]; then
        echo "--- test failed (rc=$rc); daemon logs:" >&2
        tail -n 30 "$T"/*/cairnd.log "$T"/*.daemon.log >&2 2>/dev/null || true
        # CAIRN_TEST_KEEP_FAILED=1 keeps the scratch dir (pool files, logs) for a post-mortem.
        if [ "${CAIRN_TEST_KEEP_FAILED:-0}" = 1 ]; then
            echo "--- kept $T" >&2
            exit "$rc"
        fi
    fi
    rm -rf "$T"
    exit "$rc"
}
trap cairn_test_cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# A random base port whose four ports (a daemon's NFS, MOUNT, portmap and iSCSI
# listeners) have no listener on 127.0.0.1 right now. Below the kernel's ephemeral range
# (32768-60999), where client connections of other tests would otherwise take our ports
# now and then. The check matters for the tests that pass a port of their own (to keep it
# across restarts): daemon_start can retry a collision only on the ports it picks, and a
# daemon of a test running beside us holds its ports for the whole test.
cairn_random_port() {
    local p i try
    for try in $(seq 1 50); do
        p=$(( 10000 + (RANDOM * 32768 + RANDOM) % 22000 ))
        for i in 0 1 2 3; do
            if (exec 3<>"/dev/tcp/127.0.0.1/$((p + i))") 2>/dev/null; then continue 2; fi
        done
        echo "$p"
        return 0
    done
    fail "no four free ports in 50 random tries"
}

# daemon_start NAME [extra cairnd args...]: starts cairnd in the foreground (background
# job) on state dir $T/NAME; sets CAIRN_SOCKET and DAEMON_PID; waits until it answers.
daemon_start() {
    local name=$1; shift
    local state="$T/$name"
    mkdir -p "$state"
    export CAIRN_SOCKET="$state/cairnd.sock"
    local attempt p mark
    for attempt in 1 2 3 4 5; do
        p=$(cairn_random_port)
        mark=$(wc -l 2>/dev/null <"$T/$name.daemon.log" || echo 0)
        "$CAIRND" --foreground --state-dir "$state" --socket "$CAIRN_SOCKET" \
            --nfs-listen "127.0.0.1:$p" --mount-listen "127.0.0.1:$((p + 1))" \
            --portmap-listen "127.0.0.1:$((p + 2))" --iscsi-listen "127.0.0.1:$((p + 3))" \
            "$@" 2>>"$T/$name.daemon.log" &
        DAEMON_PID=$!
        CAIRN_DAEMON_PIDS+=("$DAEMON_PID")
        # A listener port taken by someone else: try other ports (only our random
        # ones; ports the caller passed come after ours in "$@" and win).
        if daemon_wait_or_exit "$DAEMON_PID"; then return 0; fi
        tail -n +"$((mark + 1))" "$T/$name.daemon.log" | grep -q 'Address already in use' ||
            fail "cairnd (pid $DAEMON_PID) exited during start-up"
    done
    fail "cairnd: no free listen ports after 5 attempts"
}

# daemon_wait_or_exit PID: like daemon_wait, but returns 1 when the daemon exits.
daemon_wait_or_exit() {
    local pid=$1 i
    for i in $(seq 1 600); do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" 2>/dev/null || true
            return 1
        fi
        if [ -S "$CAIRN_SOCKET" ] && "$CAIRN" pool list >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.1
    done
    fail "cairnd at $CAIRN_SOCKET did not answer within 60 s"
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

# ---- pool data and damage helpers (test_pool_*.sh, test_crash_*.sh) ----

OBJTEST="$CAIRN_BIN/cairn_objtest"

# A soak run when CAIRN_TEST_LONG=1: tests scale their rounds with it.
cairn_long() { [ "${CAIRN_TEST_LONG:-0}" = 1 ]; }

# objtest MODE DIR POOL ARGS...: runs cairn_objtest in this process's place (the pool
# must not be imported by a daemon); requires exit 0. Output in $LAST_STDOUT.
objtest() {
    local mode=$1 dir=$2 pool=$3; shift 3
    if ! "$OBJTEST" "$mode" -d "$dir" "$pool" "$@" >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "cairn_objtest $mode $pool $*: $(grep -v ' INFO ' "$LAST_STDERR" | tail -n 5) $(tail -n 12 "$LAST_STDOUT")"
    fi
}

# check_clean POOL DIR...: the offline `cairn check` passes (every block verifies, exact
# space accounting). Report in $LAST_STDOUT.
check_clean() {
    local pool=$1; shift
    local args=() d
    for d in "$@"; do args+=(-d "$d"); done
    if ! "$CAIRN" check "${args[@]}" "$pool" >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "cairn check $pool: $(cat "$LAST_STDERR") $(tr '\n' ' ' <"$LAST_STDOUT")"
    fi
    grep -Eq '^result: +clean$' "$LAST_STDOUT" || fail "cairn check $pool: $(cat "$LAST_STDOUT")"
}

# wait_scrub POOL [SECONDS]: polls `pool status -v` until the scrub has finished; the
# final status is in $LAST_STDOUT.
wait_scrub() {
    local pool=$1 secs=${2:-120} i
    for i in $(seq 1 $((secs * 10))); do
        run_ok "$CAIRN" pool status -v "$pool"
        grep -q 'scan: scrub repaired' "$LAST_STDOUT" && return 0
        grep -q 'scan: scrub canceled' "$LAST_STDOUT" && fail "scrub of $pool was canceled"
        sleep 0.1
    done
    fail "scrub of $pool did not finish within $secs s: $(cat "$LAST_STDOUT")"
}

# leaf_row PATH: the status row of leaf PATH in $LAST_STDOUT as "STATE READ WRITE CKSUM".
leaf_row() {
    awk -v p="$1" '$1 == p { print $2, $3, $4, $5; found = 1; exit } END { exit !found }' \
        "$LAST_STDOUT" || fail "no status row for $1: $(cat "$LAST_STDOUT")"
}

# scrub_repaired: the bytes the last finished scrub in $LAST_STDOUT repaired ("0" or "12K").
scrub_repaired() {
    sed -n 's/.*scan: scrub repaired \([^ ]*\) in .*/\1/p' "$LAST_STDOUT"
}

# corrupt_data FILE COUNT SEED: overwrites COUNT random 4 KiB chunks with random bytes
# (dd conv=notrunc), chosen inside the file's allocated extents (SEEK_DATA) between
# 4 MiB and size - 512 KiB, where a pool's blocks live: damage that reads must notice.
# Prints the number of chunks written (fewer only if the data area is nearly empty).
corrupt_data() {
    local file=$1 count=$2 seed=$3 off n=0
    for off in $(python3 - "$file" "$count" "$seed" <<'PY'
import os, random, sys
path, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
size = os.path.getsize(path)
lo, hi = 4 << 20, size - (512 << 10)
fd = os.open(path, os.O_RDONLY)
chunks, pos = [], lo
while pos < hi:
    try:
        d = os.lseek(fd, pos, os.SEEK_DATA)
    except OSError:
        break
    if d >= hi:
        break
    h = min(os.lseek(fd, d, os.SEEK_HOLE), hi)
    first, last = (d + 4095) // 4096, h // 4096
    chunks.extend(range(first, last))
    pos = max(h, d + 4096)
rnd = random.Random(seed)
for c in sorted(rnd.sample(chunks, min(count, len(chunks)))):
    print(c)
PY
    ); do
        dd if=/dev/urandom of="$file" bs=4096 seek="$off" count=1 conv=notrunc status=none
        n=$((n + 1))
    done
    echo "$n"
}

# corrupt_front_labels FILE: overwrites the first 512 KiB (the front label copies).
corrupt_front_labels() {
    dd if=/dev/urandom of="$1" bs=64K count=8 conv=notrunc status=none
}

# data_area_bytes FILE: allocated bytes of a sparse leaf file between 4 MiB and
# size - 512 KiB (outside the labels), i.e. roughly what the pool stored on it.
data_area_bytes() {
    python3 - "$1" <<'PY'
import os, sys
path = sys.argv[1]
size = os.path.getsize(path)
lo, hi = 4 << 20, size - (512 << 10)
fd = os.open(path, os.O_RDONLY)
total, pos = 0, lo
while pos < hi:
    try:
        d = os.lseek(fd, pos, os.SEEK_DATA)
    except OSError:
        break
    if d >= hi:
        break
    h = min(os.lseek(fd, d, os.SEEK_HOLE), hi)
    total += h - d
    pos = max(h, d + 1)
print(total)
PY
}

# ---- an iSCSI writer that keeps a list of its acknowledged writes (test_pool_logdev_*.sh) ----

# The writer (iscsi_client ackwrite) does FUA writes to LUN 0 of target $TGT at portal $P
# (HOST:PORT) over the first $BLOCKS blocks, data derived from $SEED, and appends a line to
# the file $ACKS for every write acknowledged; `iscsi_client ackverify` with the same
# arguments checks after a crash that every one of them is there. The test sets those
# variables before start_writer; a new writer (new ACKS and SEED) numbers from 1 again.

# acks: how many writes the writer has had acknowledged so far.
acks() { wc -l <"$ACKS" 2>/dev/null || echo 0; }

# wait_acks N: until N more writes were acknowledged (fails if the writer died).
wait_acks() {
    local want=$(( $(acks) + $1 )) i
    for i in $(seq 1 3000); do
        [ "$(acks)" -ge "$want" ] && return 0
        kill -0 "$ACKWRITER_PID" 2>/dev/null || fail "writer died: $(cat "$T/ackwriter.err")"
        sleep 0.02
    done
    fail "no progress of the writer: $(acks) acks"
}

# start_writer: starts the writer in the background (ACKWRITER_PID) and waits for its first ack.
start_writer() {
    "$CAIRN_BIN/iscsi_client" ackwrite "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS" \
        >"$T/ackwriter.out" 2>"$T/ackwriter.err" &
    ACKWRITER_PID=$!
    wait_acks 1
}

# stop_writer: kills the writer and reaps it.
stop_writer() {
    kill -9 "$ACKWRITER_PID" 2>/dev/null || true
    wait "$ACKWRITER_PID" 2>/dev/null || true
}

# ---- disks that fail and are resilvered under NFS and iSCSI clients ----
# (test_pool_fault, _spare, _resilver*, _rebuild, _space: source nfs_lib.sh too.)

# pool_put POOL NAME MIB: a random file of MIB MiB written through NFS into
# POOL/fs, kept as $T/POOL.NAME to compare.
pool_put() {
    head -c "$(($3 << 20))" /dev/urandom >"$T/$1.$2"
    nfs_client "$(nfs_url "/$1/fs")" putfile "$2" "$T/$1.$2"
}

# pool_verify_all POOL: every file pool_put wrote into POOL reads back byte for byte.
pool_verify_all() {
    local f name
    for f in "$T/$1".*; do
        name=${f##*/$1.}
        nfs-cat "$(nfs_url "/$1/fs/$name")" >"$T/readback" 2>/dev/null || fail "$1: cannot read $name back"
        cmp -s "$f" "$T/readback" || fail "$1: $name differs"
    done
}

# scrub_clean POOL [SECONDS]: a scrub that repairs nothing and finds no error.
scrub_clean() {
    run_ok "$CAIRN" pool scrub "$1"
    wait_scrub "$1" "${2:-120}"
    grep -q 'scan: scrub repaired 0 in .* with 0 errors' "$LAST_STDOUT" ||
        fail "$1: scrub: $(grep scan: "$LAST_STDOUT")"
}

# resilvered POOL: waits for the resilver to end; prints the bytes it resilvered.
resilvered() {
    run_ok "$CAIRN" pool wait -t resilver "$1"
    run_ok "$CAIRN" pool status "$1"
    local r
    r=$(sed -n 's/.*scan: resilvered \([^ ]*\) in .* with 0 errors on .*/\1/p' "$LAST_STDOUT")
    [ -n "$r" ] || fail "$1: no finished resilver in: $(cat "$LAST_STDOUT")"
    numfmt --from=iec "$r"
}

# log_mark: the daemon log's ($LOG) line count now; log_wait FROM_LINE PATTERN waits (up
# to 120 s) for a line matching PATTERN after line FROM_LINE and prints it.
log_mark() { wc -l <"$LOG"; }
log_wait() {
    local from=$1 pat=$2 i line
    for i in $(seq 1 1200); do
        line=$(tail -n +"$((from + 1))" "$LOG" | grep -a -m1 -E "$pat" || true)
        [ -n "$line" ] && { echo "$line"; return 0; }
        sleep 0.1
    done
    fail "no log line '$pat' within 120 s: $(tail -n 5 "$LOG")"
}

# iscsi_lun_setup POOL [NAME]: a 64 MiB volume POOL/vol exported as LUN 0 of target $TGT
# (iqn...:NAME, NAME defaults to POOL), for the acknowledged-write writer below.
iscsi_lun_setup() {
    TGT=iqn.2026-12.org.cairn.test:${2:-$1}
    run_ok "$CAIRN" create -V 64M "$1/vol"
    run_ok "$CAIRN" iscsi target create "$TGT"
    run_ok "$CAIRN" iscsi lun add "$TGT" "$1/vol"
}

# fail_under_load POOL SEED MIB FILE...: with POOL/fs shared, the iSCSI writer (ACKS
# $T/acks.POOL) running and an NFS client writing MIB-MiB files, the fault-injecting
# leaves of each FILE stop answering (FILE.eio). The writer keeps running.
fail_under_load() {
    local pool=$1 mib=$3 f
    iscsi_lun_setup "$pool"
    ACKS="$T/acks.$pool" SEED=$2
    shift 3
    start_writer
    pool_put "$pool" a "$mib"
    for f in "$@"; do touch "$f.eio"; done
    pool_put "$pool" b "$mib"
    wait_acks 300
}

# load_verified POOL: the writer stopped, every acknowledged iSCSI write and every NFS
# file reads back, a scrub finds nothing; then the target goes.
load_verified() {
    stop_writer
    run_ok "$CAIRN_BIN/iscsi_client" ackverify "$P" "$TGT" "$SEED" "$BLOCKS" "$ACKS"
    pool_verify_all "$1"
    scrub_clean "$1"
    run_ok "$CAIRN" iscsi target destroy -f "$TGT"
}

# leaf_state POOL PATH: the STATE column of the leaf (`pool status` in $LAST_STDOUT).
leaf_state() {
    run_ok "$CAIRN" pool status "$1"
    leaf_row "$2" | cut -d' ' -f1
}

# wait_state POOL PATH STATE: until the leaf shows STATE (fault management acts by itself).
wait_state() {
    local i
    for i in $(seq 1 300); do
        [ "$(leaf_state "$1" "$2")" = "$3" ] && return 0
        sleep 0.1
    done
    fail "$2 never became $3: $(cat "$LAST_STDOUT")"
}

# spare_row POOL PATH: the state the spares section gives PATH (empty: not listed).
spare_row() {
    run_ok "$CAIRN" pool status "$1"
    sed -n '/^	spares$/,/^$/p' "$LAST_STDOUT" | awk -v p="$2" '$1 == p { print $2 }'
}

# wait_spare_in POOL SPARE: until SPARE is INUSE under a spare-N vdev and resilvered.
# A spare that fault management (or an import) takes in shows in the tree a txg sync
# before its resilver starts, and `pool wait -t resilver` has nothing to wait for in
# between: so until no leaf shows "(resilvering)" either.
wait_spare_in() {
    local i
    for i in $(seq 1 300); do
        [ "$(spare_row "$1" "$2")" = INUSE ] && grep -q 'spare-[0-9]' "$LAST_STDOUT" && break
        [ "$i" -lt 300 ] || fail "$2 never stepped in: $(cat "$LAST_STDOUT")"
        sleep 0.1
    done
    for i in $(seq 1 600); do
        run_ok "$CAIRN" pool wait -t resilver "$1"
        run_ok "$CAIRN" pool status "$1"
        grep -q '(resilvering)' "$LAST_STDOUT" || return 0
        sleep 0.1
    done
    fail "$2 stepped in but was never resilvered: $(cat "$LAST_STDOUT")"
}

# wait_spare_avail POOL SPARE: until SPARE is back in the list (AVAIL) with no spare-N left.
wait_spare_avail() {
    local i
    for i in $(seq 1 300); do
        [ "$(spare_row "$1" "$2")" = AVAIL ] && ! grep -q 'spare-[0-9]' "$LAST_STDOUT" && return 0
        sleep 0.1
    done
    fail "$2 never returned: $(cat "$LAST_STDOUT")"
}

# pool_space POOL: "SIZE USED+AVAILABLE" as `pool list` and the pool's dataset show them;
# checks that the pool's alloc + free make its size.
pool_space() {
    run_ok "$CAIRN" pool list -H -p "$1"
    local size alloc free
    IFS=$'\t' read -r _ size alloc free _ <"$LAST_STDOUT"
    [ $((alloc + free)) = "$size" ] || fail "$1: alloc $alloc + free $free != size $size"
    echo "$size $(($(ds_get used "$1") + $(ds_get available "$1")))"
}
# same_space POOL BEFORE WHAT: the size is BEFORE's to the byte, used+available within 2%
# (what a user reads: a spare or a replacement adds no capacity). Writes still in flight
# count against available until their txg syncs, so used+available gets 10 s to settle.
same_space() {
    local now b_size b_tot n_size n_tot i
    read -r b_size b_tot <<<"$2"
    for i in $(seq 1 20); do
        now=$(pool_space "$1")
        read -r n_size n_tot <<<"$now"
        [ "$n_size" = "$b_size" ] || fail "$1 $3: pool size $n_size, was $b_size"
        [ $(((n_tot - b_tot) * 50)) -le "$b_tot" ] && [ $(((b_tot - n_tot) * 50)) -le "$b_tot" ] &&
            return 0
        sleep 0.5
    done
    fail "$1 $3: used+available $n_tot, was $b_tot"
}

# pool_synced POOL: returns once every change made to POOL so far has synced (its
# space numbers, alloc and used, count it). A property change is a task of the txg
# sync, so `set` returns only when the txg holding it has synced, and with it every
# txg before; a user property changes nothing else. A fixed pause of a txg_timeout
# is no such promise on a loaded machine.
pool_synced() {
    run_ok "$CAIRN" set "test:synced=$((++CAIRN_SYNC_MARKS))" "$1"
}
CAIRN_SYNC_MARKS=0

# ---- dataset helpers (test_cli_datasets*.sh) ----

# ds_get PROP DATASET: the exact value (get -H -p -o value).
ds_get() {
    "$CAIRN" get -H -p -o value "$1" "$2" 2>"$LAST_STDERR" ||
        fail "cairn get $1 $2: $(cat "$LAST_STDERR")"
}
# ds_source PROP DATASET: the SOURCE column ("local", "default", "inherited from X", "-").
ds_source() {
    "$CAIRN" get -H -o source "$1" "$2" 2>"$LAST_STDERR" ||
        fail "cairn get $1 $2: $(cat "$LAST_STDERR")"
}
# expect_prop PROP DATASET VALUE [SOURCE]: get -p shows VALUE (and SOURCE).
expect_prop() {
    local v; v=$(ds_get "$1" "$2")
    [ "$v" = "$3" ] || fail "$1 of $2 is '$v', want '$3'"
    if [ $# -ge 4 ]; then
        local s; s=$(ds_source "$1" "$2")
        [ "$s" = "$4" ] || fail "source of $1 on $2 is '$s', want '$4'"
    fi
}
# ds_names [LIST ARGS...]: the names `cairn list -H -o name -t all -r ARGS` prints, one a line.
ds_names() {
    "$CAIRN" list -H -o name -t all -r "$@" 2>"$LAST_STDERR" ||
        fail "cairn list $*: $(cat "$LAST_STDERR")"
}
# ds_state: every dataset of every pool with its settable properties (for before/after
# comparisons; no space numbers, which change as txgs sync). Leaves $LAST_STDERR alone.
ds_state() {
    "$CAIRN" list -H -p -r -t all \
        -o name,type,compression,recordsize,quota,reservation,volsize,mountpoint 2>"$T/ds_state.err" ||
        fail "cairn list: $(cat "$T/ds_state.err")"
}

# wait_unlocked FILE...: waits (up to 10 s) until no process holds a flock on any FILE.
# A process killed with SIGKILL that used io_uring is reaped before the kernel has torn
# its rings down; until then its files stay open and their flocks held (observed: up to
# tens of ms), and the engine's exclusive leaf open fails with EBUSY meanwhile.
wait_unlocked() {
    local f i
    for f in "$@"; do
        for i in $(seq 1 1000); do
            flock -n "$f" true 2>/dev/null && break
            [ "$i" -lt 1000 ] || fail "$f is still locked 10 s after its user died"
            sleep 0.01
        done
    done
}

# ---- filesystem crash helpers (test_crash_datasets.sh) ----

FSTEST="$CAIRN_BIN/cairn_fstest"

# fstest MODE DIR POOL ARGS...: runs cairn_fstest in process (the pool must not be
# imported by a daemon); requires exit 0. Output in $LAST_STDOUT.
fstest() {
    local mode=$1 dir=$2 pool=$3; shift 3
    if ! "$FSTEST" "$mode" -d "$dir" "$pool" "$@" >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "cairn_fstest $mode $pool $*: $(grep -v ' INFO ' "$LAST_STDERR" | tail -n 5) $(grep -v ' objects, ' "$LAST_STDOUT" | head -n 40)"
    fi
}

# sleep_ms MS: sleeps MS milliseconds.
sleep_ms() { sleep "$(($1 / 1000)).$(printf '%03d' $(($1 % 1000)))"; }

# vm_require: sets VM_DIR to the qemu guest kit (../shared/vm beside the source tree, or
# CAIRN_VM_DIR) and builds its image once; exits 77 (ctest: skipped) only when the image
# cannot be built on this machine.
vm_require() {
    VM_DIR=${CAIRN_VM_DIR:-$CAIRN_SRC/../shared/vm}
    [ -x "$VM_DIR/run-vm.sh" ] || VM_DIR=/work/shared/vm
    if ! "$VM_DIR/build-vm.sh" >"$T/build-vm.log" 2>&1; then
        echo "SKIP: the VM image cannot be built: $(tail -n 3 "$T/build-vm.log")"
        exit 77
    fi
}
