#!/usr/bin/env bash
# arc_max sized from the machine (issue 27): with no arc_max configured, cairnd's ARC
# target and bound are half of the memory it may use (MemTotal, or its cgroup's
# memory.max when lower; at least 64 MiB), shown by `cairn pool iostat -p` and
# `cairn arcstat` (cmax) and logged; a configured arc_max still wins; a bad one
# is refused with its name.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

sparse_files "$T/p" 128M a
# iostat -v -H -p: the "arc" row's 3rd field is c (the target), its 5th arc_max.
arc_field() { run_ok "$CAIRN" pool iostat -v -H -p p1; awk -F'\t' -v f="$1" '$1 == "arc" { print $f }' "$LAST_STDOUT"; }

usable=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 1024 ))
# The memory cgroup cairnd will be in (ours): v2's memory.max, else v1's limit.
cg2=$(sed -n 's/^0:://p' /proc/self/cgroup) cg1=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
lim=max
if [ -r "/sys/fs/cgroup$cg2/memory.max" ]; then lim=$(cat "/sys/fs/cgroup$cg2/memory.max")
elif [ -n "$cg1" ] && [ -r "/sys/fs/cgroup/memory$cg1/memory.limit_in_bytes" ]; then
    lim=$(cat "/sys/fs/cgroup/memory$cg1/memory.limit_in_bytes")
fi
# (v1 says "no limit" with a number larger than any machine's memory)
[ "$lim" = max ] || [ "$(echo "$lim >= $usable" | bc)" = 1 ] || usable=$lim
want=$((usable / 2)); [ "$want" -ge $((64 << 20)) ] || want=$((64 << 20))

daemon_start d1
run_ok "$CAIRN" pool create p1 "$T/p/a"
[ "$(arc_field 5)" = "$want" ] || fail "arc_max is not half of $usable bytes ($want): $(cat "$LAST_STDOUT")"
# The target is arc_max unless memory is short right now (the watch lowers it then).
c=$(arc_field 3)
[ "$c" -le "$want" ] && [ "$c" -ge $((64 << 20)) ] || fail "c $c outside [64 MiB, $want]"
grep -q "arc_max $((want >> 20)) MiB: half of $((usable >> 20)) MiB" "$T/d1.daemon.log" \
    || fail "no sizing line in the log: $(grep arc_max "$T/d1.daemon.log" || true)"
run_ok "$CAIRN" arcstat
expect_stdout '^ +time .* size +c +p +cmax +dsize '
pass "no arc_max: half of the memory ($((want >> 20)) MiB), in iostat, arcstat and the log"
run_ok "$CAIRN" pool export p1
daemon_stop

printf 'arc_max = 96M\n' >"$T/cairnd.conf"
daemon_start d2 --config "$T/cairnd.conf"
run_ok "$CAIRN" pool import -d "$T/p" p1
[ "$(arc_field 5)" = $((96 << 20)) ] || fail "configured arc_max not used: $(cat "$LAST_STDOUT")"
pass "a configured arc_max overrides the machine's"
run_ok "$CAIRN" pool export p1
daemon_stop

printf 'arc_max = lots\n' >"$T/bad.conf"
if "$CAIRND" --foreground --config "$T/bad.conf" --state-dir "$T/d3" 2>"$T/bad.err"; then
    fail "cairnd started with arc_max = lots"
fi
grep -q "arc_max" "$T/bad.err" || fail "the error does not name arc_max: $(cat "$T/bad.err")"
pass "a bad arc_max is refused, naming it"
