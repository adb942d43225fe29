#!/usr/bin/env bash
# The ARC and L2ARC through the CLI: arc_max from the daemon's config, `pool create
# ... cache DEV`, `pool add POOL cache DEV`, `cairn arcstat [-v] [INTERVAL [COUNT]]`, cache devices coming back
# after kill -9 (with their contents: reads after the restart are L2 hits, and the data
# verifies) and after export/import, forgotten after destroy, and bad input.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CLIENT="$CAIRN_BIN/iscsi_client"
TGT=iqn.2026-11.org.cairn.test:arc
P=127.0.0.1:$(cairn_random_port)
sparse_files "$T/p" 128M a b
sparse_files "$T/c" 64M c0 c1 c2
truncate -s 1M "$T/c/tiny"
printf 'arc_max = 64M\n' >"$T/cairnd.conf"
daemon_start d1 --config "$T/cairnd.conf" --iscsi-listen "$P"

run_ok "$CAIRN" arcstat
expect_stdout '^ +time +read +hit +miss +hit% .* size +c +p .* l2hit +l2feed +l2size$'
awk 'NR == 2 && $11 ~ /^64(\.0)?M$/ { ok = 1 } END { exit !ok }' "$LAST_STDOUT" \
    || fail "arcstat: c is not arc_max=64M: $(cat "$LAST_STDOUT")"
pass "arcstat shows c = arc_max from the config"

run_ok "$CAIRN" pool create p1 "$T/p/a" cache "$T/c/c0"
run_ok "$CAIRN" create p1/fs
for i in 1 2 3 4 5; do run_ok "$CAIRN" create "p1/fs/d$i"; done
run_ok "$CAIRN" list -r p1
run_ok "$CAIRN" arcstat -v
expect_stdout "^p1 +$T/c/c0 +ONLINE "
pass "pool create with a cache device; arcstat -v lists it"

run_ok "$CAIRN" arcstat 1 2
[ "$(grep -c '^ *[0-9][0-9]:' "$LAST_STDOUT")" -eq 2 ] || fail "arcstat 1 2: $(cat "$LAST_STDOUT")"
pass "arcstat INTERVAL COUNT prints COUNT lines"

# Data for the cache device: 16 MiB written through iSCSI, synced (export/import), then
# read back through the ARC, whose feed copies it to c0.
run_ok "$CAIRN" create -V 24M p1/vol
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" p1/vol
run_ok "$CLIENT" write "$P" "$TGT" 5 4096 1
run_ok "$CAIRN" pool export p1
run_ok "$CAIRN" pool import -d "$T/p" p1
run_ok "$CLIENT" verify "$P" "$TGT" 5 4096
# iostat -v -H -p: the "arc" row's 8th and 9th fields are L2_SIZE and L2_HITS; a
# device row's 5th is its READ_OPS.
arc_field() { run_ok "$CAIRN" pool iostat -v -H -p p1; awk -F'\t' -v f="$1" '$1 == "arc" { print $f }' "$LAST_STDOUT"; }
c0_reads() { run_ok "$CAIRN" pool iostat -v -H -p p1; awk -F'\t' -v c="$T/c/c0" '$1 == c { print $5 }' "$LAST_STDOUT"; }
for i in $(seq 1 300); do
    [ "$(arc_field 8)" -ge $((4 * 1024 * 1024)) ] && break
    [ "$i" -lt 300 ] || fail "the feed did not put 4 MiB on the cache device: $(cat "$LAST_STDOUT")"
    sleep 0.1
done

kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
wait_unlocked "$T/p/a"
daemon_start d1 --config "$T/cairnd.conf" --iscsi-listen "$P"
run_ok "$CAIRN" arcstat -v
expect_stdout "^p1 +$T/c/c0 +ONLINE "
# A new process: its ARC is empty, so every data block read misses memory; the cache
# device's rebuilt index serves those the feed wrote (each read verified against its
# block pointer), the rest come from the pool's disk.
hits0=$(arc_field 9)
reads0=$(c0_reads)
run_ok "$CLIENT" verify "$P" "$TGT" 5 4096
hits1=$(arc_field 9)
reads1=$(c0_reads)
echo "after the restart: $((hits1 - hits0)) L2 hits, $((reads1 - reads0)) cache device reads"
[ "$((hits1 - hits0))" -ge 256 ] || fail "reads after the restart: $((hits1 - hits0)) L2 hits: $(cat "$LAST_STDOUT")"
[ "$((reads1 - reads0))" -ge 256 ] || fail "reads after the restart: $((reads1 - reads0)) cache device reads"
run_ok "$CAIRN" arcstat
awk 'NR == 2 && $15 != "0" { ok = 1 } END { exit !ok }' "$LAST_STDOUT" \
    || fail "arcstat shows no l2hit after the restart: $(cat "$LAST_STDOUT")"
pass "after kill -9 the cache device comes back with its contents: L2 hits, data verified"

run_ok "$CAIRN" pool export p1
run_ok "$CAIRN" arcstat -v
if grep -q "c/c0" "$LAST_STDOUT"; then fail "exported pool's cache device still listed"; fi
run_ok "$CAIRN" pool import -d "$T/p" p1
run_ok "$CAIRN" arcstat -v
expect_stdout "^p1 +$T/c/c0 +ONLINE "
run_ok "$CAIRN" list -r p1
expect_stdout "p1/fs/d5"
run_ok "$CAIRN" arcstat
awk 'NR == 2 && $2 != "0" && $10 != "0" { ok = 1 } END { exit !ok }' "$LAST_STDOUT" \
    || fail "arcstat: the import read nothing through the ARC: $(cat "$LAST_STDOUT")"
pass "export / import re-attaches the cache device; the import's reads fill the ARC"

run_fail "$CAIRN" pool create p2 "$T/p/b" cache
expect_stderr "cache' needs at least one device"
run_fail "$CAIRN" pool create p2 "$T/p/b" cache "$T/c/nope"
expect_stderr "cannot open cache device"
run_fail "$CAIRN" pool create p2 "$T/p/b" cache "$T/c/tiny"
expect_stderr "too small"
run_fail "$CAIRN" pool create p2 "$T/p/b" cache "$T/c/c1" "$T/c/c1"
expect_stderr "more than once"
run_ok "$CAIRN" pool list
if grep -q '^p2 ' "$LAST_STDOUT"; then fail "a failed create left pool p2 behind"; fi
run_ok "$CAIRN" pool create p2 "$T/p/b" cache "$T/c/c1"
pass "bad cache sections are refused and leave nothing behind"

run_ok "$CAIRN" pool add p2 cache "$T/c/c2"
run_ok "$CAIRN" arcstat -v
expect_stdout "^p2 +$T/c/c1 +ONLINE "
expect_stdout "^p2 +$T/c/c2 +ONLINE "
run_fail "$CAIRN" pool add p2 cache "$T/c/c2"
expect_stderr "already a cache device"
run_fail "$CAIRN" pool add nopool cache "$T/c/c0"
expect_stderr "no such pool"
grep -q "c/c2" "$T/d1/l2arc.cache" || fail "added cache device not remembered"
pass "pool add POOL cache DEV"

run_ok "$CAIRN" pool destroy p1
run_ok "$CAIRN" pool destroy p2
grep -q "c/c0\|c/c1\|c/c2" "$T/d1/l2arc.cache" && fail "destroyed pools' cache devices remembered"
run_fail "$CAIRN" arcstat 0
expect_stderr "bad interval"
pass "destroy forgets the cache devices; bad arcstat arguments"
daemon_stop
