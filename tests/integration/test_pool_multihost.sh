#!/usr/bin/env bash
# Multihost protection (src/spa/spa_mmp.c): two cairnd processes stand for two
# hosts sharing the pool's disks (device_lock = off: no flock between them, as
# none spans real hosts; different host ids, short heartbeat intervals).
#   a) A has the pool with multihost=on: B's import is refused, with and without -f;
#   b) A is killed -9: B's import without -f is refused (not exported), with -f it
#      succeeds after the activity check and A's synced changes are there;
#   c) imports started at the same moment by A and B never both succeed;
#   d) A's I/O stalls (the fault leaf's FILE.stall switch): B imports; when A's I/O
#      resumes A has suspended itself and the pool files are exactly as B left them.
#   e) the same with A stopped by SIGSTOP (file leaves): after SIGCONT A suspends.
# And a daemon without a configured hostid keeps the one it drew across restarts.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

conf() { # conf NAME HOSTID: a config file for a "host"
    cat >"$T/$1.conf" <<EOF
hostid = $2
device_lock = off
mmp_interval = 200
mmp_fail_intervals = 10
EOF
    echo "$T/$1.conf"
}
CONF_A=$(conf a 0a0a0a0a)
CONF_B=$(conf b 0b0b0b0b)

# Two "hosts"; each command names its socket.
daemon_start a --config "$CONF_A"; PID_A=$DAEMON_PID; SOCK_A=$CAIRN_SOCKET
daemon_start b --config "$CONF_B"; PID_B=$DAEMON_PID; SOCK_B=$CAIRN_SOCKET
A() { "$CAIRN" --socket "$SOCK_A" "$@"; }
B() { "$CAIRN" --socket "$SOCK_B" "$@"; }

run_ok A hostid
[ "$(cat "$LAST_STDOUT")" = 0a0a0a0a ] || fail "A's hostid: $(cat "$LAST_STDOUT")"
run_ok B hostid
[ "$(cat "$LAST_STDOUT")" = 0b0b0b0b ] || fail "B's hostid: $(cat "$LAST_STDOUT")"

# Without hostid in its config a daemon draws one on its first start and keeps it.
daemon_start c
run_ok "$CAIRN" hostid
kept=$(cat "$LAST_STDOUT")
[[ "$kept" =~ ^[0-9a-f]{8}$ ]] && [ "$kept" != 00000000 ] || fail "drawn hostid: '$kept'"
[ "$(cat "$T/c/hostid")" = "$kept" ] || fail "state dir keeps '$(cat "$T/c/hostid")', daemon says $kept"
daemon_stop
daemon_start c
run_ok "$CAIRN" hostid
[ "$(cat "$LAST_STDOUT")" = "$kept" ] || fail "hostid changed across a restart: $kept -> $(cat "$LAST_STDOUT")"
daemon_stop
pass "a daemon's drawn host id is kept in its state dir across restarts"

d=$T/disks
sparse_files "$d" 128M l1 l2

# ---- a) a live pool is refused to the other host, -f or not ----
run_ok A pool create -o multihost=on mp mirror "$d/l1" "$d/l2"
run_ok A pool get -H multihost mp
expect_stdout "^mp	multihost	on	local$"
run_ok A create mp/from_a
run_fail B pool import -d "$d" mp
expect_stderr "last imported by host .* \(hostid 0a0a0a0a\) and not exported; use -f"
run_fail B pool import -f -d "$d" mp
expect_stderr "is imported on host .* \(hostid 0a0a0a0a\) and active"
run_ok A pool get health mp
expect_stdout "ONLINE"
pass "a live multihost pool is refused to another host, with and without -f"

# ---- b) after a crash: not without -f; with -f after the activity check ----
daemon_kill9 "$PID_A"
run_fail B pool import -d "$d" mp
expect_stderr "last imported by host .* \(hostid 0a0a0a0a\) and not exported; use -f"
run_ok B pool import -f -d "$d" mp
run_ok B list -H -o name -r mp
expect_stdout "^mp/from_a$"
grep -Eq "multihost activity check, watching its heartbeats for [0-9]+ ms" "$T/b.daemon.log" ||
    fail "B logged no activity check"
# A comes back: its cached pool is now B's, so it leaves it alone.
daemon_start a --config "$CONF_A"; PID_A=$DAEMON_PID
run_ok A pool list
grep -q "^mp" "$LAST_STDOUT" && fail "restarted A took back B's pool: $(cat "$LAST_STDOUT")"
grep -q "cannot import cached pool 'mp'.*hostid 0b0b0b0b" "$T/a.daemon.log" ||
    fail "A did not say why it left mp alone: $(grep mp "$T/a.daemon.log" | tail -n 3)"
run_ok B pool export mp
pass "a crashed host's pool: refused without -f, imported with -f, its data there"

# ---- c) racing imports never both succeed ----
wins_total=0
for round in 1 2 3 4; do
    rc_a=0 rc_b=0
    A pool import -d "$d" mp >"$T/ra" 2>&1 & ja=$!
    B pool import -d "$d" mp >"$T/rb" 2>&1 & jb=$!
    wait "$ja" || rc_a=$?
    wait "$jb" || rc_b=$?
    [ "$rc_a" -ne 0 ] || [ "$rc_b" -ne 0 ] ||
        fail "round $round: both hosts imported the pool: $(cat "$T/ra" "$T/rb")"
    for who in a b; do
        rc=rc_$who
        if [ "${!rc}" -eq 0 ]; then
            wins_total=$((wins_total + 1))
            "$CAIRN" --socket "$T/$who/cairnd.sock" pool export mp >/dev/null
        else
            grep -Eq "is (being )?imported (on|by) host|and active" "$T/r$who" ||
                fail "round $round: $who refused for another reason: $(cat "$T/r$who")"
        fi
    done
done
echo "racing imports: $wins_total of 4 rounds had a winner, none had two"
pass "racing imports never both succeed"

# ---- d) a host whose I/O stalls gives way ----
# A has a pool on fault leaves over other files; B reaches the same files directly.
s=$T/stall
sparse_files "$s" 128M l1 l2
run_ok A pool create -o multihost=on sp mirror "fault:$s/l1" "fault:$s/l2"
run_ok A create sp/before_stall
touch "$s/l1.stall" "$s/l2.stall"
# A change A accepts while stalled: its txg's writes queue behind the stall.
timeout 120 "$CAIRN" --socket "$SOCK_A" create sp/during_stall >"$T/during" 2>&1 & j_during=$!
sleep 0.5
run_ok B pool import -f -d "$s" sp
run_ok B create sp/from_b
run_ok B pool export sp
before=$(cksum "$s/l1" "$s/l2")
rm -f "$s/l1.stall" "$s/l2.stall"
# (Bounded at a minute, not 10 s: this test runs under TSan too, on a loaded machine.)
for i in $(seq 1 600); do
    A pool get -H health sp >"$LAST_STDOUT" 2>/dev/null || true
    grep -q SUSPENDED "$LAST_STDOUT" && break
    sleep 0.1
done
grep -q SUSPENDED "$LAST_STDOUT" || fail "A did not suspend the pool: $(cat "$LAST_STDOUT")"
if timeout 30 "$CAIRN" --socket "$SOCK_A" create sp/after_resume 2>/dev/null; then
    fail "A created a dataset in a suspended pool"
fi
rc_during=0
wait "$j_during" || rc_during=$?
[ "$rc_during" -ne 0 ] || fail "A's change made during the stall was acknowledged"
run_ok A pool status sp
expect_stdout "state: SUSPENDED"
# Stopping A's service (what a cluster agent does): the export ends, writing nothing.
timeout 60 "$CAIRN" --socket "$SOCK_A" pool export sp >/dev/null 2>&1 || true
run_ok A pool list -H
grep -q "^sp" "$LAST_STDOUT" && fail "A still lists sp after exporting it"
after=$(cksum "$s/l1" "$s/l2")
[ "$before" = "$after" ] || fail "A wrote to the devices after B imported the pool"
# Its heartbeat thread or its sync thread (whose writes the fence refused) says so first.
grep -E "pool sp( is suspended|: sync of txg [0-9]+ failed .* the pool is suspended)" "$T/a.daemon.log" ||
    fail "A did not log its suspension"
daemon_kill9 "$PID_A"
check_clean sp "$s"
run_ok B pool import -d "$s" sp
run_ok B list -H -o name -r sp
expect_stdout "^sp/from_b$"
expect_stdout "^sp/before_stall$"
run_ok B pool export sp
pass "a stalled host suspends itself and writes nothing after the other imports"

# ---- e) the same with the whole process stopped (SIGSTOP), on plain file leaves ----
daemon_start a --config "$CONF_A"; PID_A=$DAEMON_PID
run_ok A pool list -H
grep -q "^mp" "$LAST_STDOUT" && fail "restarted A took mp from its cache after B exported it"
run_ok A pool import -d "$d" mp
run_ok A create mp/before_stop
kill -STOP "$PID_A"
run_ok B pool import -f -d "$d" mp
run_ok B create mp/from_b_again
run_ok B pool export mp
before=$(cksum "$d/l1" "$d/l2")
kill -CONT "$PID_A"
for i in $(seq 1 600); do
    A pool get -H health mp >"$LAST_STDOUT" 2>/dev/null || true
    grep -q SUSPENDED "$LAST_STDOUT" && break
    sleep 0.1
done
grep -q SUSPENDED "$LAST_STDOUT" || fail "A did not suspend after SIGCONT: $(cat "$LAST_STDOUT")"
timeout 60 "$CAIRN" --socket "$SOCK_A" pool export mp >/dev/null 2>&1 || true
after=$(cksum "$d/l1" "$d/l2")
[ "$before" = "$after" ] || fail "A wrote to the devices after its SIGCONT"
daemon_stop "$PID_A"
check_clean mp "$d"
pass "a stopped host suspends itself when it runs again and writes nothing"
daemon_stop "$PID_B"
