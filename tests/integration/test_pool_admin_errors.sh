#!/usr/bin/env bash
# Refusals of `pool add` and `pool remove`: each one line "cairn: ...", a non-zero exit,
# and the pool exactly as before (status, cache file, the daemon still serving).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

sparse_files "$T/p" 256M a b c other
sparse_files "$T/l" 128M l1 l2 l3 l4
truncate -s 16M "$T/l/tiny"
daemon_start d1
run_ok "$CAIRN" pool create zl "$T/p/a" log mirror "$T/l/l1" "$T/l/l2"
run_ok "$CAIRN" pool add zl log "$T/l/l3"
run_ok "$CAIRN" pool create other "$T/p/other"

snapshot() {
    run_ok "$CAIRN" pool status zl
    sed -e '/scan:/d' "$LAST_STDOUT" >"$T/status.$1"
    cp "$T/d1/pools.cache" "$T/cache.$1"
}
unchanged() {
    snapshot after
    cmp -s "$T/status.before" "$T/status.after" ||
        fail "$1 changed the pool: $(diff "$T/status.before" "$T/status.after")"
    cmp -s "$T/cache.before" "$T/cache.after" || fail "$1 changed the pool cache file"
}
snapshot before

refuse() { # refuse MESSAGE CMD...: fails with MESSAGE, changes nothing
    local msg=$1; shift
    run_fail "$@"
    expect_stderr "$msg"
    unchanged "$*"
}

# pool add
refuse "mismatched replication level: pool uses a single disk and new vdev is a 2-way mirror" \
    "$CAIRN" pool add zl mirror "$T/p/b" "$T/l/l4"
refuse "mismatched replication level: pool uses a single disk and new vdev is a 3-wide raidz1" \
    "$CAIRN" pool add zl raidz1 "$T/p/b" "$T/l/l4" "$T/p/c"
refuse "a log vdev is a device or a mirror" "$CAIRN" pool add zl log raidz1 "$T/p/b" "$T/l/l4" "$T/l/tiny"
refuse "'log' must be followed" "$CAIRN" pool add zl log
refuse "is already in pool 'zl'" "$CAIRN" pool add zl log "$T/l/l1"
refuse "device is in use by another pool" "$CAIRN" pool add zl log "$T/p/other"
run_ok "$CAIRN" pool export other
snapshot before # the cache file forgot it
refuse "is part of exported pool 'other'; use -f" "$CAIRN" pool add zl log "$T/p/other"
refuse "too small" "$CAIRN" pool add zl log "$T/l/tiny"
refuse "cannot open" "$CAIRN" pool add zl log "$T/l/nothere"
refuse "given more than once" "$CAIRN" pool add zl log mirror "$T/l/l4" "$T/l/l4"
refuse "no such pool 'nopool'" "$CAIRN" pool add nopool log "$T/l/l4"
refuse "missing vdevs" "$CAIRN" pool add zl
refuse "invalid pool name" "$CAIRN" pool add 9zl log "$T/l/l4"
pass "pool add refusals change nothing"

# pool remove
refuse "removing a data vdev is not supported" "$CAIRN" pool remove zl "$T/p/a"
refuse "one side of log vdev 'mirror-1'" "$CAIRN" pool remove zl "$T/l/l1"
refuse "no such device in pool 'zl'" "$CAIRN" pool remove zl "$T/l/l4"
refuse "no such device in pool 'zl'" "$CAIRN" pool remove zl "$T/p/other"
refuse "no such device in pool 'zl'" "$CAIRN" pool remove zl mirror-7
refuse "no such pool 'nopool'" "$CAIRN" pool remove nopool "$T/l/l3"
refuse "missing pool name and device" "$CAIRN" pool remove zl
refuse "unexpected argument" "$CAIRN" pool remove zl "$T/l/l3" "$T/l/l2"
pass "pool remove refusals change nothing"

# The daemon still serves, and the refused pool still works: -f takes the exported
# pool's device, a relative path names a device, and the allowed removals go through.
run_ok "$CAIRN" pool add -f zl log "$T/p/other"
run_ok "$CAIRN" pool status zl
grep -A6 '^	logs$' "$LAST_STDOUT" | grep -q "$T/p/other" || fail "-f add missing: $(cat "$LAST_STDOUT")"
(cd "$T/p" && "$CAIRN" pool remove zl other) || fail "pool remove by a relative path failed"
run_ok "$CAIRN" pool remove zl mirror-1 # not the last: its id stays, as a hole
run_fail "$CAIRN" pool remove zl hole-1
expect_stderr "no such device in pool 'zl'"
run_ok "$CAIRN" pool remove zl "$T/l/l3"
run_ok "$CAIRN" pool status zl
! grep -q "logs" "$LAST_STDOUT" || fail "log vdevs left after removing them: $(cat "$LAST_STDOUT")"
! grep -q "$T/l/" "$T/d1/pools.cache" || fail "removed devices still in the pool cache file"
run_fail "$CAIRN" pool remove zl "$T/l/l3"
expect_stderr "no such device in pool 'zl'"
run_ok "$CAIRN" pool export zl
check_clean zl "$T/p"
pass "after the refusals the pool still takes the allowed removals and checks clean"
