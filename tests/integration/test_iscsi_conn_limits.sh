#!/usr/bin/env bash
# Connection caps and the login deadline of the iSCSI target (issue 24: 1024 idle
# connections used to block every login, one thread each). With iscsi_max_connections
# = 8 and iscsi_max_connections_per_client = 4, attackers on 127.0.0.2..4 holding
# logins open (conn_flood.py) get exactly their share: one address is refused past 4
# (logged, naming the setting), a newcomer holding fewer than the biggest holder gets
# in by taking the place of one of its unfinished logins (logged). While they hold
# the target full, iscsi-ls and iscsi-inq from 127.0.0.1 still log in. Then, with
# iscsi_login_timeout = 3, logins kept alive by a continuation PDU now and then are
# closed anyway, and running out of descriptors is logged without the accept thread
# spinning.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

FLOOD="python3 $CAIRN_SRC/tests/integration/conn_flood.py"
TGT=iqn.2026-12.org.cairn.test:caps
PORT=$(cairn_random_port)
P=127.0.0.1:$PORT

cat >"$T/caps.conf" <<CONF
iscsi_max_connections = 8
iscsi_max_connections_per_client = 4
iscsi_login_timeout = 600
CONF
sparse_files "$T/dev" 2G a
daemon_start d1 --config "$T/caps.conf" --iscsi-listen "$P"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -V 64M tank/vol
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" tank/vol

$FLOOD caps iscsi "$PORT" "$T/status" "$T/go" 2 127.0.0.2:6 127.0.0.3:6 127.0.0.4:3 \
    >"$T/flood.log" 2>&1 &
flood=$!
for _ in $(seq 1 1200); do
    [ -f "$T/status" ] && break
    kill -0 "$flood" 2>/dev/null || fail "conn_flood.py: $(cat "$T/flood.log")"
    sleep 0.1
done
[ -f "$T/status" ] || fail "conn_flood.py did not finish its connections in 120 s"
expect_line() { grep -qx "$1" "$T/status" || fail "flood: expected '$1': $(tr '\n' ';' <"$T/status")"; }
expect_line "127.0.0.2 admitted 4 refused 2"
expect_line "127.0.0.3 admitted 4 refused 2"
expect_line "127.0.0.4 admitted 2 refused 1"
expect_line "evicted 2"
pass "per-client cap and fair eviction at the total cap"

iscsi-ls -s "iscsi://$P" >"$T/ls" 2>&1 || fail "iscsi-ls: $(cat "$T/ls")"
grep -q "$TGT" "$T/ls" || fail "iscsi-ls lacks the target: $(cat "$T/ls")"
iscsi-inq "iscsi://$P/$TGT/0" >"$T/inq" 2>&1 || fail "iscsi-inq: $(cat "$T/inq")"
grep -qi "cairn" "$T/inq" || fail "iscsi-inq: $(cat "$T/inq")"
pass "real initiators log in while the attackers hold the target full"

grep -q 'refused: it holds 4, the cap (iscsi_max_connections_per_client)' "$T/d1.daemon.log" ||
    fail "the per-client cap was not logged"
grep -q '8 connections, the cap (iscsi_max_connections): 127.0.0.[23]:[0-9]* (in login' \
    "$T/d1.daemon.log" || fail "the total cap was not logged"
pass "caps logged with their settings"
touch "$T/go"
wait "$flood" || fail "conn_flood.py: $(cat "$T/flood.log")"
# The real client got in by taking the place of attackers' connections: the server
# was full indeed.
n=$(sed -n 's/^closed at the end: //p' "$T/flood.log")
[ "${n:-0}" -ge 3 ] || fail "iscsi-ls and iscsi-inq did not need an eviction: $(cat "$T/flood.log")"
daemon_stop

# The login deadline, on a daemon without pools.
printf 'iscsi_login_timeout = 3\n' >"$T/login.conf"
PORT=$(cairn_random_port)
daemon_start d2 --config "$T/login.conf" --iscsi-listen "127.0.0.1:$PORT"
$FLOOD idle iscsi "$PORT" 127.0.0.2 4 60 >"$LAST_STDOUT" 2>&1 ||
    fail "dribbled logins: $(cat "$LAST_STDOUT")"
pass "logins past iscsi_login_timeout closed: $(cat "$LAST_STDOUT")"
daemon_stop

# Out of descriptors (on a daemon with the default login timeout, so that admitted
# logins hold theirs): accept() fails with the connection left in the backlog and
# the listener readable. The failure is logged (naming the setting to lower) and the
# accept thread pauses for a second instead of spinning; once descriptors are free
# again, connections are accepted again.
PORT=$(cairn_random_port)
daemon_start d3 --iscsi-listen "127.0.0.1:$PORT"
base=$(ls /proc/"$DAEMON_PID"/fd | wc -l)
prlimit --nofile=$((base + 8)) --pid "$DAEMON_PID"
CONN_FLOOD_PROBE_WAIT=1 $FLOOD caps iscsi "$PORT" "$T/status2" "$T/go2" 0 127.0.0.2:12 \
    >"$T/flood2.log" 2>&1 &
flood=$!
for _ in $(seq 1 1200); do
    [ -f "$T/status2" ] && break
    kill -0 "$flood" 2>/dev/null || fail "conn_flood.py: $(cat "$T/flood2.log")"
    sleep 0.1
done
grep -Eq '^127.0.0.2 admitted [1-9][0-9]* refused 0 unanswered [1-9]' "$T/status2" ||
    fail "out of descriptors: $(tr '\n' ';' <"$T/status2")"
grep -q 'cannot accept connections (.*Too many open files; raise `ulimit -n` or lower iscsi_max_connections' \
    "$T/d3.daemon.log" || fail "running out of descriptors was not logged"
touch "$T/go2"
wait "$flood" || fail "conn_flood.py: $(cat "$T/flood2.log")"
$FLOOD caps iscsi "$PORT" "$T/status3" "$T/status3" 0 127.0.0.1:1 >"$T/flood3.log" 2>&1 ||
    fail "conn_flood.py: $(cat "$T/flood3.log")"
grep -qx '127.0.0.1 admitted 1 refused 0' "$T/status3" ||
    fail "after the flood: $(tr '\n' ';' <"$T/status3")"
pass "out of descriptors: logged, and connections accepted again once they are free"
daemon_stop
