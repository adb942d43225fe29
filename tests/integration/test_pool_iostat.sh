#!/usr/bin/env bash
# `cairn pool iostat [-v] [-H] [-p] [--json] [POOL] [INTERVAL [COUNT]]`: the shape of its
# output (per pool; with -v per vdev in data, log and cache sections plus the ARC/L2ARC
# table), counters that move with I/O and stay still without, its refusals; and
# `pool remove POOL CACHEDEV`, after which reads still work and the device stays gone
# across a restart.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CLIENT="$CAIRN_BIN/iscsi_client"
TGT=iqn.2026-11.org.cairn.test:iostat
PORT=$(cairn_random_port)
P=127.0.0.1:$PORT

sparse_files "$T/p" 256M a b
sparse_files "$T/l" 128M l1
sparse_files "$T/c" 128M c1
daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" pool create -o txg_timeout=300 io mirror "$T/p/a" "$T/p/b" log "$T/l/l1" cache "$T/c/c1"
run_ok "$CAIRN" create -V 32M io/vol
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" io/vol

# ---- shape ----
run_ok "$CAIRN" pool iostat
head -n 1 "$LAST_STDOUT" | grep -Eq '^NAME +ALLOC +FREE +READ_OPS +WRITE_OPS +READ_BW +WRITE_BW$' ||
    fail "iostat header: $(cat "$LAST_STDOUT")"
grep -Eq '^io +[0-9.]+[KMG]? +[0-9.]+[KMG] ' "$LAST_STDOUT" || fail "iostat pool row: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool iostat -H -p io
[ "$(wc -l <"$LAST_STDOUT")" -eq 1 ] || fail "iostat -H: $(cat "$LAST_STDOUT")"
awk -F'\t' 'NF != 7 || $1 != "io" { exit 1 } { for (i = 2; i <= 7; i++) if ($i !~ /^[0-9]+$/) exit 1 }' \
    "$LAST_STDOUT" || fail "iostat -H -p: $(cat -A "$LAST_STDOUT")"
run_ok "$CAIRN" pool iostat -v -H -p io
grep -q "^arc	" "$LAST_STDOUT" || fail "no ARC line in iostat -v -H: $(cat "$LAST_STDOUT")"
grep -v "^arc	" "$LAST_STDOUT" | cut -f1,2 >"$T/rows"
printf '%s\n' "io	pool" "mirror-0	data" "$T/p/a	data" "$T/p/b	data" "$T/l/l1	log" "$T/c/c1	cache" |
    cmp -s - "$T/rows" || fail "iostat -v rows: $(cat "$T/rows")"
# Mirror sides have no capacity of their own; the log and cache devices do.
awk -F'\t' -v a="$T/p/a" '$1 == a && $3 == "-" && $4 == "-" { ok = 1 } END { exit !ok }' "$LAST_STDOUT" ||
    fail "a mirror side shows capacity: $(cat "$LAST_STDOUT")"
awk -F'\t' -v c="$T/c/c1" '$1 == c && $4 > 0 { ok = 1 } END { exit !ok }' "$LAST_STDOUT" ||
    fail "no capacity for the cache device: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool iostat -v io
grep -Eq '^NAME +ARC_SIZE +TARGET +MRU_TARGET +ARC_MAX +HITS +MISSES +L2_SIZE +L2_HITS +L2_MISSES +L2_FEEDS +L2_FEED_BW$' \
    "$LAST_STDOUT" || fail "no ARC table in iostat -v: $(cat "$LAST_STDOUT")"
grep -q "^    $T/p/a " "$LAST_STDOUT" || fail "leaves not indented under their mirror: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool iostat -v --json io
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["name"]: r for r in d["iostat"]}
assert rows["io"]["class"] == "pool" and isinstance(rows["io"]["alloc"], int), rows
assert rows[sys.argv[2]]["class"] == "cache", rows
assert isinstance(d["arc"][0]["arc_max"], int), d["arc"]
' "$LAST_STDOUT" "$T/c/c1" || fail "iostat --json: $(cat "$LAST_STDOUT")"
pass "iostat output: default, -H -p, -v sections, --json"

run_fail "$CAIRN" pool iostat nopool
expect_stderr "no such pool 'nopool'"
run_fail "$CAIRN" pool iostat io 0
expect_stderr "bad interval '0'"
run_fail "$CAIRN" pool iostat io 1 x
expect_stderr "bad count 'x'"
run_fail "$CAIRN" pool iostat io 1 2 3
expect_stderr "unexpected argument '3'"
run_fail "$CAIRN" pool iostat -x
expect_stderr "unknown option '-x'"
pass "iostat refusals"

# ---- counters: they move while an initiator writes, and stand still when idle ----
"$CLIENT" ackwrite "$P" "$TGT" 3 2048 "$T/acks" >"$T/w.out" 2>"$T/w.err" &
wpid=$!
for i in $(seq 1 500); do grep -q ready "$T/w.out" 2>/dev/null && break; sleep 0.02; done
grep -q ready "$T/w.out" || fail "writer did not start: $(cat "$T/w.err")"
run_ok "$CAIRN" pool iostat -v -H -p io 1 2
kill -9 "$wpid"
wait "$wpid" 2>/dev/null || true
# The second report is the interval: FUA writes were logged to l1 throughout it.
awk 'seen; /^arc\t/ { seen = 1 }' "$LAST_STDOUT" >"$T/second"
awk -F'\t' -v l="$T/l/l1" '$1 == l && $6 > 0 && $8 > 0 { ok = 1 } END { exit !ok }' "$T/second" ||
    fail "log device writes did not move while writing: $(cat "$LAST_STDOUT")"
awk -F'\t' '$1 == "io" && $6 > 0 { ok = 1 } END { exit !ok }' "$T/second" ||
    fail "pool writes did not move while writing: $(cat "$LAST_STDOUT")"
# The writer's last txg syncs within the txg timeout after it stops (a sync can
# fall into a 1-s interval; under ASan one did), so: an interval without writes
# must come within a few, as it never would if idle counters kept moving.
for i in $(seq 1 8); do
    run_ok "$CAIRN" pool iostat -H -p io 1 2
    tail -n 1 "$LAST_STDOUT" | awk -F'\t' '$5 == 0 && $7 == 0 { ok = 1 } END { exit !ok }' && break
    [ "$i" -lt 8 ] || fail "an idle pool shows writes: $(cat "$LAST_STDOUT")"
done
pass "iostat counters move with I/O and stand still without"

# ---- the cache device's counters: reads through the ARC are fed to it ----
# (Re-imported, so the data is on disk and read through the ARC, not from dirty buffers.)
run_ok "$CAIRN" pool export io
run_ok "$CAIRN" pool import -d "$T/p" -d "$T/l" io
run_ok "$CLIENT" ackverify "$P" "$TGT" 3 2048 "$T/acks"
for i in $(seq 1 300); do
    run_ok "$CAIRN" pool iostat -v -H -p io
    awk -F'\t' -v c="$T/c/c1" '$1 == c && $6 > 0 && $8 > 0 { ok = 1 } END { exit !ok }' \
        "$LAST_STDOUT" && break
    [ "$i" -lt 300 ] || fail "no writes or write bandwidth on the cache device: $(cat "$LAST_STDOUT")"
    sleep 0.1
done
grep "^arc	" "$LAST_STDOUT" | awk -F'\t' '$7 > 0 && $8 > 0 { ok = 1 } END { exit !ok }' ||
    fail "no ARC misses or L2 size after reading: $(cat "$LAST_STDOUT")"
pass "the cache device's writes and the ARC/L2ARC figures move"

# ---- removing the cache device ----
run_ok "$CAIRN" pool remove io "$T/c/c1"
run_ok "$CAIRN" pool iostat -v -H -p io
! grep -q "$T/c/c1" "$LAST_STDOUT" || fail "removed cache device still in iostat: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" arcstat -v
! grep -q "$T/c/c1" "$LAST_STDOUT" || fail "removed cache device still in arcstat: $(cat "$LAST_STDOUT")"
! grep -q "c/c1" "$T/d1/l2arc.cache" || fail "removed cache device still remembered"
run_fail "$CAIRN" pool remove io "$T/c/c1"
expect_stderr "no such device in pool 'io'"
run_ok "$CLIENT" ackverify "$P" "$TGT" 3 2048 "$T/acks"
daemon_stop
daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" arcstat -v
! grep -q "$T/c/c1" "$LAST_STDOUT" || fail "removed cache device came back after a restart"
run_ok "$CLIENT" ackverify "$P" "$TGT" 3 2048 "$T/acks"
run_ok "$CAIRN" pool export io
check_clean io "$T/p" "$T/l"
pass "pool remove of a cache device: gone from iostat, arcstat and the daemon's memory; data intact"
