#!/usr/bin/env bash
# `cairn pool history [-l] POOL`: every command that changed the pool or its datasets,
# in order, with its time, stored in the pool: it survives a clean restart, a kill -9
# and export/import. Disk service (offline, online, clear, attach, detach, replace) is
# recorded as well. Refused commands, dry runs (`pool add -n`) and reads are not
# recorded; -l adds who ran it where. (That the history stays bounded with the
# creation record kept is the ring's unit test, test_dsl_history.)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

sparse_files "$T/d" 256M a b c d e f
daemon_start d1
run_ok "$CAIRN" pool create hp mirror "$T/d/a" "$T/d/b"
run_ok "$CAIRN" create hp/fs
run_ok "$CAIRN" set compression=lz4 hp/fs
run_ok "$CAIRN" snapshot hp/fs@monday
run_ok "$CAIRN" pool set comment="two words" hp
run_ok "$CAIRN" pool add -n hp mirror "$T/d/c" "$T/d/d"      # a dry run: not history
run_fail "$CAIRN" pool add hp "$T/d/c"                      # refused: not history
run_fail "$CAIRN" create hp/fs                               # refused: not history
run_ok "$CAIRN" list -r hp                                   # a read: not history
run_ok "$CAIRN" pool add hp mirror "$T/d/c" "$T/d/d"
run_ok "$CAIRN" create -V 16M hp/vol
run_ok "$CAIRN" destroy hp/fs@monday
run_ok "$CAIRN" pool offline hp "$T/d/a"
run_ok "$CAIRN" pool online hp "$T/d/a"
run_ok "$CAIRN" pool clear hp
run_ok "$CAIRN" pool wait hp
run_ok "$CAIRN" pool attach hp "$T/d/c" "$T/d/e"
run_ok "$CAIRN" pool wait hp
run_ok "$CAIRN" pool detach hp "$T/d/e"
run_ok "$CAIRN" pool replace hp "$T/d/d" "$T/d/f"
run_ok "$CAIRN" pool wait hp
run_fail "$CAIRN" pool detach hp "$T/d/nosuch"              # refused: not history

expected() {
    cat <<EOT
History for 'hp':
cairn pool create hp mirror $T/d/a $T/d/b
cairn create hp/fs
cairn set compression=lz4 hp/fs
cairn snapshot hp/fs@monday
cairn pool set 'comment=two words' hp
cairn pool add hp mirror $T/d/c $T/d/d
cairn create -V 16M hp/vol
cairn destroy hp/fs@monday
cairn pool offline hp $T/d/a
cairn pool online hp $T/d/a
cairn pool clear hp
cairn pool attach hp $T/d/c $T/d/e
cairn pool detach hp $T/d/e
cairn pool replace hp $T/d/d $T/d/f
EOT
    for l in "$@"; do echo "$l"; done
}
# check_history [EXTRA LINES...]: the history without its times is exactly the list.
check_history() {
    run_ok "$CAIRN" pool history hp
    sed -E 's/^[0-9]{4}-[0-9]{2}-[0-9]{2}\.[0-9]{2}:[0-9]{2}:[0-9]{2} //' "$LAST_STDOUT" >"$T/got"
    expected "$@" >"$T/want"
    diff "$T/want" "$T/got" >"$T/diff" || fail "pool history: $(cat "$T/diff")"
    # Times never go backwards.
    grep -Eo '^[0-9-]+\.[0-9:]+' "$LAST_STDOUT" >"$T/times"
    sort -c "$T/times" || fail "times out of order: $(cat "$LAST_STDOUT")"
}
check_history
run_ok "$CAIRN" pool history -l hp
grep -q "cairn create hp/fs \[user .* (uid $(id -u)) on $(hostname)\]" "$LAST_STDOUT" ||
    fail "-l lacks who and where: $(cat "$LAST_STDOUT")"
pass "history lists the changing commands in order; refusals, dry runs and reads left out"

daemon_stop
daemon_start d1
check_history
run_ok "$CAIRN" snapshot hp/vol@after-restart
daemon_kill9
wait_unlocked "$T/d/a"
daemon_start d1
check_history "cairn snapshot hp/vol@after-restart"
pass "history survives a clean restart and a kill -9 (a recorded command was on disk)"

run_ok "$CAIRN" pool export hp
run_ok "$CAIRN" pool import -d "$T/d" hp
check_history "cairn snapshot hp/vol@after-restart" "cairn pool import -d $T/d hp"
run_fail "$CAIRN" pool history nosuch
expect_stderr "no such pool 'nosuch'"
run_fail "$CAIRN" pool history
expect_stderr "missing pool name"
pass "history survives export/import (the import recorded); unknown pool refused"
