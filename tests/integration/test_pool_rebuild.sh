#!/usr/bin/env bash
# Sequential rebuild (`pool attach -s`, `pool replace -s`) on mirrors with data:
#  - a disk becomes a 2-way mirror by attach -s: status shows the rebuild as
#    "resilvered ... (sequential)" and the scrub that follows by itself; the scrub
#    repairs nothing, and with the old disk offline every file reads back from
#    the new side alone;
#  - replace -s of a mirror side by a new file, the same checks;
#  - kill -9 in the middle of a sequential rebuild (slowed with
#    CAIRN_RESILVER_DELAY_US): after restart it goes on from its saved offset;
#  - a source side failing every read (fault: leaf, FILE.eio): each chunk its
#    read failed is read from the other side, the rebuild counts no error;
#  - refused with one line on raidz, and while a resilver runs; nothing changed.
# The pool ends with `cairn check` clean.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

LOG="$T/d1.daemon.log"
nfs_daemon_start d1

# rebuilt POOL: waits for the rebuild and the scrub after it; both lines in status,
# the scrub clean. Prints the bytes the rebuild copied.
rebuilt() {
    run_ok "$CAIRN" pool wait -t resilver "$1"
    wait_scrub "$1" 300
    local r
    r=$(sed -n 's/.*scan: resilvered \([^ ]*\) (sequential) in .* with 0 errors on .*/\1/p' "$LAST_STDOUT")
    [ -n "$r" ] || fail "$1: no sequential rebuild line in: $(cat "$LAST_STDOUT")"
    grep -q 'scan: scrub repaired 0 in .* with 0 errors' "$LAST_STDOUT" \
        || fail "$1: the scrub after the rebuild: $(grep scan: "$LAST_STDOUT")"
    numfmt --from=iec "$r"
}

pool=tank
dir="$T/$pool"
sparse_files "$dir" 256M l1 l2 l3 m2
run_ok "$CAIRN" pool create "$pool" "$dir/l1"
run_ok "$CAIRN" create -o sharenfs=no_root_squash "$pool/fs"
for f in a b c d; do pool_put "$pool" "$f" 8; done
run_ok "$CAIRN" snapshot "$pool/fs@one"
pool_put "$pool" e 4

# ---- attach -s: a disk becomes a mirror ----
mark=$(log_mark)
run_ok "$CAIRN" pool attach -s "$pool" "$dir/l1" "$dir/l2"
log_wait "$mark" "attached to .* \(sequential rebuild\)" >/dev/null
r=$(rebuilt "$pool")
[ "$r" -gt $((30 << 20)) ] || fail "$pool: the rebuild copied only $r bytes"
run_ok "$CAIRN" pool status "$pool"
expect_stdout "state: ONLINE"
expect_stdout "mirror-0"
log_wait "$mark" "resilver finished \(sequential\)" >/dev/null
# The new side alone serves every file.
run_ok "$CAIRN" pool offline "$pool" "$dir/l1"
pool_verify_all "$pool"
run_ok "$CAIRN" pool online "$pool" "$dir/l1"
run_ok "$CAIRN" pool wait -t resilver "$pool"
pass "$pool: attach -s rebuilt l2 sequentially ($r bytes), a scrub verified it, l2 alone serves the data"

# ---- replace -s of a mirror side ----
pool_put "$pool" f 4
run_ok "$CAIRN" pool replace -s "$pool" "$dir/l2" "$dir/m2"
r=$(rebuilt "$pool")
run_ok "$CAIRN" pool status "$pool"
expect_stdout "state: ONLINE"
if grep -q "$dir/l2 " "$LAST_STDOUT"; then fail "$pool: l2 still in the pool"; fi
run_ok "$CAIRN" pool offline "$pool" "$dir/l1"
pool_verify_all "$pool"
run_ok "$CAIRN" pool online "$pool" "$dir/l1"
run_ok "$CAIRN" pool wait -t resilver "$pool"
pass "$pool: replace -s pool_put m2 in l2's place ($r bytes), scrub clean, m2 alone serves the data"

# ---- kill -9 in the middle of a sequential rebuild ----
daemon_stop
CAIRN_RESILVER_DELAY_US=150000 nfs_daemon_start d1
mark=$(log_mark)
run_ok "$CAIRN" pool attach -s "$pool" "$dir/l1" "$dir/l3"
run_ok "$CAIRN" pool status "$pool"
expect_stdout "scan: resilver .sequential. in progress since"
# Another -s while a resilver runs: one line, nothing attached.
run_fail "$CAIRN" pool attach -s "$pool" "$dir/l1" "$dir/l2"
expect_stderr "^cairn: cannot use -s while a resilver runs: wait for it or omit -s$"
run_ok "$CAIRN" pool status "$pool"
if grep -q "$dir/l2 " "$LAST_STDOUT"; then fail "$pool: a refused attach -s attached l2"; fi
log_wait "$mark" "resilver checkpoint at vdev 0 offset" >/dev/null
daemon_kill9
mark=$(log_mark)
nfs_daemon_start d1
line=$(log_wait "$mark" "resilver resumed at vdev 0 offset")
off=$(sed -E 's/.*offset ([0-9]+) .*/\1/' <<<"$line")
[ "$off" -gt 0 ] || fail "$pool: the rebuild resumed at offset 0: $line"
r=$(rebuilt "$pool")
run_ok "$CAIRN" pool offline "$pool" "$dir/l1"
run_ok "$CAIRN" pool offline "$pool" "$dir/m2"
pool_verify_all "$pool"
run_ok "$CAIRN" pool online "$pool" "$dir/l1"
run_ok "$CAIRN" pool online "$pool" "$dir/m2"
run_ok "$CAIRN" pool wait -t resilver "$pool"
pass "$pool: a sequential rebuild killed with -9 resumed at offset $off and l3 alone serves the data"

# ---- a side that fails every read: the copy reads those chunks from the other ----
# Slowed (a pause per chunk) so that f1 starts failing in the middle of the copy,
# before a label write could fault it: the copy's own reads meet the errors.
daemon_stop
CAIRN_RESILVER_DELAY_US=150000 nfs_daemon_start d1
sparse_files "$T/f" 256M f1 f2 f3
run_ok "$CAIRN" pool create fp mirror "fault:$T/f/f1" "$T/f/f2"
run_ok "$CAIRN" create -o sharenfs=no_root_squash fp/fs
for f in a b c; do pool_put fp "$f" 16; done
mark=$(log_mark)
run_ok "$CAIRN" pool attach -s fp "$T/f/f2" "$T/f/f3"
log_wait "$mark" "attached to .* \(sequential rebuild\)" >/dev/null
touch "$T/f/f1.eio"
line=$(log_wait "$mark" "pool fp: resilver finished \(sequential\)")
grep -q ": [0-9]* bytes resilvered, 0 errors" <<<"$line" || fail "fp: $line"
if tail -n +"$((mark + 1))" "$LOG" | grep -a "pool fp: sequential rebuild" >"$T/errs.fp"; then
    fail "fp: a chunk was not copied: $(cat "$T/errs.fp")"
fi
run_ok "$CAIRN" pool wait fp
run_ok "$CAIRN" pool status fp
read_errs=$(awk -v p="fault:$T/f/f1" '$1 == p {print $3}' "$LAST_STDOUT")
[ "${read_errs:-0}" -gt 0 ] || fail "fp: the copy met no read error on f1: $(cat "$LAST_STDOUT")"
rm "$T/f/f1.eio"
run_ok "$CAIRN" pool offline fp "$T/f/f2"
pool_verify_all fp
pass "fp: a sequential rebuild beside a side failing reads ($read_errs) copied every chunk from the other"
run_ok "$CAIRN" pool destroy fp

# ---- refusals: one line, nothing changed ----
sparse_files "$T/r" 256M r1 r2 r3 n1
run_ok "$CAIRN" pool create rz raidz1 "$T/r/r1" "$T/r/r2" "$T/r/r3"
run_ok "$CAIRN" pool status rz
cp "$LAST_STDOUT" "$T/rz.before"
run_fail "$CAIRN" pool replace -s rz "$T/r/r2" "$T/r/n1"
expect_stderr "cannot replace '$T/r/r2' with -s: a sequential rebuild needs a mirror, and '$T/r/r2' is in a raidz1"
[ "$(wc -l <"$LAST_STDERR")" -eq 1 ] || fail "more than one line: $(cat "$LAST_STDERR")"
run_fail "$CAIRN" pool attach -s rz "$T/r/r2" "$T/r/n1"
expect_stderr "can only attach to mirrors and top-level disks"
run_ok "$CAIRN" pool status rz
diff "$T/rz.before" "$LAST_STDOUT" >/dev/null || fail "rz changed: $(cat "$LAST_STDOUT")"
pass "raidz: replace -s and attach -s refused with one line"

run_ok "$CAIRN" pool destroy rz
run_ok "$CAIRN" pool export "$pool"
check_clean "$pool" "$dir"
pass "$pool: check clean"
