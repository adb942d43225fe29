#!/usr/bin/env bash
# A device has one role: `pool add` (with and without -n) and `pool create` refuse,
# with one line naming it and nothing changed, a device given twice in one command in
# any two sections (data, log, cache, spare), and (add) a device the pool already has
# in any role - a data disk, a spare or a cache device.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

daemon_start d1
d=$T/f
sparse_files "$d" 128M a b c e s1 s2 k1 k2
run_ok "$CAIRN" pool create p mirror "$d/a" "$d/b" spare "$d/s1" cache "$d/k1"
run_ok "$CAIRN" pool status p
cp "$LAST_STDOUT" "$T/status.before"

# refused_add ARGS... -- PATTERN: `pool add -n` and `pool add` of ARGS fail, one line
# matching PATTERN, the pool unchanged.
refused_add() {
    local args=() n
    while [ "$1" != -- ]; do args+=("$1"); shift; done
    for n in -n ""; do
        run_fail "$CAIRN" pool add $n -f p "${args[@]}"
        expect_stderr "$2"
        run_ok "$CAIRN" pool status p
        diff -u "$T/status.before" "$LAST_STDOUT" >/dev/null ||
            fail "pool add $n ${args[*]} changed the pool: $(cat "$LAST_STDOUT")"
    done
}

# Twice in one command, across sections.
refused_add mirror "$d/c" "$d/e" spare "$d/c" -- "device '$d/c' is given more than once"
refused_add "$d/c" cache "$d/c" -- "device '$d/c' is given more than once"
refused_add spare "$d/s2" cache "$d/s2" -- "device '$d/s2' is given more than once"
refused_add mirror "$d/c" "$d/e" log "fault:$d/c" -- "is given more than once"
refused_add "fault:$d/c" spare "$d/c" -- "device '$d/c' is given more than once"
pass "a device given twice in one add (data, log, cache, spare) is refused"

# Already the pool's, in another role.
refused_add "$d/s1" -- "device '$d/s1' is already a spare of pool 'p'"
refused_add "$d/k1" -- "device '$d/k1' is already a cache device of pool 'p'"
refused_add spare "$d/k1" -- "device '$d/k1' is already a cache device of pool 'p'"
refused_add cache "$d/a" -- "device '$d/a' is already in pool 'p'"
refused_add cache "$d/s1" -- "device '$d/s1' is already a spare of pool 'p'"
refused_add spare "$d/b" -- "device '$d/b' is already in pool 'p'"
refused_add mirror "$d/c" "$d/a" -- "device '$d/a' is already in pool 'p'"
pass "a device the pool has (data, spare, cache) is refused in another role"

# create: the same rule within the command.
for args in "mirror $d/c $d/e spare $d/c" "mirror $d/c $d/e cache $d/e" \
    "mirror $d/c $d/e spare $d/s2 cache $d/s2"; do
    # shellcheck disable=SC2086
    run_fail "$CAIRN" pool create q $args
    expect_stderr "cannot create 'q': device '.*' is given more than once"
done
run_ok "$CAIRN" pool list -H
grep -q '^q' "$LAST_STDOUT" && fail "pool q was created: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool create q mirror "$d/c" "$d/e" spare "$d/s2" cache "$d/k2"
pass "create refuses a device given twice across sections; a proper create works"

# And the right add still works.
run_ok "$CAIRN" pool destroy q
run_ok "$CAIRN" pool add p mirror "$d/c" "$d/e" spare "$d/s2"
run_ok "$CAIRN" pool status p
expect_stdout "mirror-1"
pass "a proper add works"
