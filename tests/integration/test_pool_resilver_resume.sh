#!/usr/bin/env bash
# A resilver or scrub goes on from where it was, not from the beginning:
#  - kill -9 of cairnd in the middle of a resilver (slowed with
#    CAIRN_RESILVER_DELAY_US): after restart the log says where it resumed (a
#    position saved by a checkpoint, bytes issued before > 0), it finishes having
#    issued fewer bytes in the new run than in all, and the new disk is whole:
#    every file reads back, a scrub repairs nothing, `cairn check` is clean;
#  - the same across `pool export` / `pool import`, with writes meanwhile;
#  - a scrub (slowed with CAIRN_SCRUB_DELAY_US) killed with -9 resumes after
#    restart and finishes with 0 errors.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

export CAIRN_RESILVER_DELAY_US=20000 CAIRN_SCRUB_DELAY_US=20000
LOG="$T/d1.daemon.log"
nfs_daemon_start d1

# resumed_check FROM_LINE WHAT: the scan resumed at a saved position with bytes
# issued before the restart, then finished issuing fewer bytes in this run than
# in all. Prints "before/run/total".
resumed_check() {
    local from=$1 what=$2 line before run total
    line=$(log_wait "$from" "$what resumed at objset")
    before=$(sed -E 's/.*, ([0-9]+) issued before.*/\1/' <<<"$line")
    [ "$before" -gt 0 ] || fail "$what resumed from nothing: $line"
    line=$(log_wait "$from" "$what finished: ")
    total=$(sed -E 's/.* ([0-9]+) bytes issued \(([0-9]+) in this run\).*/\1/' <<<"$line")
    run=$(sed -E 's/.* ([0-9]+) bytes issued \(([0-9]+) in this run\).*/\2/' <<<"$line")
    [ "$run" -lt "$total" ] || fail "$what issued $run bytes after the restart of $total: not resumed"
    echo "$before/$run/$total"
}

pool=mtank
dir="$T/$pool"
sparse_files "$dir" 256M l1 l2
run_ok "$CAIRN" pool create "$pool" mirror "$dir/l1" "$dir/l2"
run_ok "$CAIRN" create -o sharenfs=no_root_squash "$pool/fs"
for f in a b c d e f; do pool_put "$pool" "$f" 8; done
run_ok "$CAIRN" snapshot "$pool/fs@one"
pool_put "$pool" g 4

# ---- kill -9 in the middle of a resilver ----
run_ok "$CAIRN" pool offline "$pool" "$dir/l2"
rm -f "$dir/l2"
truncate -s 256M "$dir/l2"
mark=$(log_mark)
run_ok "$CAIRN" pool replace "$pool" "$dir/l2"
line=$(log_wait "$mark" "resilver checkpoint at objset")
echo "before the kill: $line"
daemon_kill9
mark=$(log_mark)
nfs_daemon_start d1
run_ok "$CAIRN" pool status "$pool"
expect_stdout "scan: resilver in progress since"
counts=$(resumed_check "$mark" resilver)
run_ok "$CAIRN" pool wait -t resilver "$pool"
run_ok "$CAIRN" pool status "$pool"
expect_stdout "state: ONLINE"
expect_stdout "scan: resilvered .* with 0 errors"
pool_verify_all "$pool"
scrub_clean "$pool" 300
pass "$pool: resilver killed with -9 resumed at its checkpoint (issued before/after restart/total: $counts)"

# ---- export and import in the middle of a resilver, with writes between ----
run_ok "$CAIRN" pool offline "$pool" "$dir/l1"
rm -f "$dir/l1"
truncate -s 256M "$dir/l1"
mark=$(log_mark)
run_ok "$CAIRN" pool replace "$pool" "$dir/l1"
log_wait "$mark" "resilver checkpoint at objset" >/dev/null
pool_put "$pool" h 2
run_ok "$CAIRN" pool export "$pool"
mark=$(log_mark)
run_ok "$CAIRN" pool import -d "$dir" "$pool"
pool_put "$pool" i 2
counts=$(resumed_check "$mark" resilver)
run_ok "$CAIRN" pool wait -t resilver "$pool"
run_ok "$CAIRN" pool status "$pool"
expect_stdout "state: ONLINE"
pool_verify_all "$pool"
scrub_clean "$pool" 300
pass "$pool: resilver resumed after export/import (issued before/after/total: $counts)"

# ---- a scrub killed with -9 goes on after restart ----
mark=$(log_mark)
run_ok "$CAIRN" pool scrub "$pool"
log_wait "$mark" "scrub checkpoint at objset" >/dev/null
daemon_kill9
mark=$(log_mark)
nfs_daemon_start d1
counts=$(resumed_check "$mark" scrub)
wait_scrub "$pool" 300
grep -q 'scan: scrub repaired 0 in .* with 0 errors' "$LAST_STDOUT" \
    || fail "$pool: resumed scrub: $(grep scan: "$LAST_STDOUT")"
pass "$pool: scrub killed with -9 resumed and finished clean (issued before/after/total: $counts)"

run_ok "$CAIRN" pool export "$pool"
check_clean "$pool" "$dir"
pass "$pool: check clean"
