#!/usr/bin/env bash
# Connection caps and the idle timer of the NFS server (issue 24: 4096 idle connections
# used to lock every client out, silently). With nfs_max_connections = 8 and
# nfs_max_connections_per_client = 4, attackers on 127.0.0.2..4 (conn_flood.py) get
# exactly their share: one address is refused past 4 (logged, naming the setting), a
# newcomer holding fewer than the biggest holder gets in by closing one of its idle
# connections (logged), equals do not evict each other. While they hold the server
# full, real libnfs clients (nfs-ls, nfs-cat) from 127.0.0.1 are still served. Then,
# with nfs_idle_timeout = 3, connections without a request are closed while one that
# keeps calling stays, and running out of descriptors is logged without the I/O
# thread spinning on its listeners.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

FLOOD="python3 $CAIRN_SRC/tests/integration/conn_flood.py"

sparse_files "$T/dev" 4G a
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
echo "served despite the flood" >"$T/hello.txt"
run_ok nfs-cp "$T/hello.txt" "$(nfs_url /tank/share/hello.txt)"
# Restart with the caps: the connections of the client above are gone for sure.
daemon_stop
cat >"$T/caps.conf" <<CONF
nfs_max_connections = 8
nfs_max_connections_per_client = 4
nfs_idle_timeout = 600
CONF
nfs_daemon_start d1 --config "$T/caps.conf"
expect_share /tank/share

$FLOOD caps nfs "$NFS_PORT" "$T/status" "$T/go" 2 127.0.0.2:6 127.0.0.3:6 127.0.0.4:3 \
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

run_ok nfs-ls "$(nfs_url /tank/share)"
expect_stdout hello.txt
run_ok nfs-cat "$(nfs_url /tank/share/hello.txt)"
[ "$(cat "$LAST_STDOUT")" = "served despite the flood" ] || fail "nfs-cat: $(cat "$LAST_STDOUT")"
pass "a real client is served while the attackers hold the server full"

grep -q 'refused: it holds 4, the cap (nfs_max_connections_per_client)' "$T/d1.daemon.log" ||
    fail "the per-client cap was not logged"
grep -q '8 connections, the cap (nfs_max_connections): an idle one of 127.0.0.[23]' \
    "$T/d1.daemon.log" || fail "the total cap was not logged"
pass "caps logged with their settings"
touch "$T/go"
wait "$flood" || fail "conn_flood.py: $(cat "$T/flood.log")"
# The real client got in by taking the place of attackers' connections: the server
# was full indeed.
n=$(sed -n 's/^closed at the end: //p' "$T/flood.log")
[ "${n:-0}" -ge 3 ] || fail "nfs-ls and nfs-cat did not need an eviction: $(cat "$T/flood.log")"
daemon_stop

# The idle timer, on a daemon without pools.
printf 'nfs_idle_timeout = 3\n' >"$T/idle.conf"
nfs_daemon_start d2 --config "$T/idle.conf"
$FLOOD idle nfs "$NFS_PORT" 127.0.0.2 5 60 >"$LAST_STDOUT" 2>&1 ||
    fail "idle connections: $(cat "$LAST_STDOUT")"
pass "idle connections closed, a busy one kept: $(cat "$LAST_STDOUT")"

# Out of descriptors: accept() fails with the connection left in the backlog and the
# listener readable. The failure is logged (naming the setting to lower) and the
# listeners pause for a second instead of spinning the I/O thread; once descriptors
# are free again, connections are accepted again.
base=$(ls /proc/"$DAEMON_PID"/fd | wc -l)
prlimit --nofile=$((base + 8)) --pid "$DAEMON_PID"
CONN_FLOOD_PROBE_WAIT=1 $FLOOD caps nfs "$NFS_PORT" "$T/status2" "$T/go2" 0 127.0.0.2:12 \
    >"$T/flood2.log" 2>&1 &
flood=$!
for _ in $(seq 1 1200); do
    [ -f "$T/status2" ] && break
    kill -0 "$flood" 2>/dev/null || fail "conn_flood.py: $(cat "$T/flood2.log")"
    sleep 0.1
done
grep -Eq '^127.0.0.2 admitted [1-9][0-9]* refused 0 unanswered [1-9]' "$T/status2" ||
    fail "out of descriptors: $(tr '\n' ';' <"$T/status2")"
grep -q 'cannot accept connections (.*Too many open files; raise `ulimit -n` or lower nfs_max_connections' \
    "$T/d2.daemon.log" || fail "running out of descriptors was not logged"
touch "$T/go2"
wait "$flood" || fail "conn_flood.py: $(cat "$T/flood2.log")"
$FLOOD caps nfs "$NFS_PORT" "$T/status3" "$T/status3" 0 127.0.0.1:1 >"$T/flood3.log" 2>&1 ||
    fail "conn_flood.py: $(cat "$T/flood3.log")"
grep -qx '127.0.0.1 admitted 1 refused 0' "$T/status3" ||
    fail "after the flood: $(tr '\n' ';' <"$T/status3")"
pass "out of descriptors: logged, and connections accepted again once they are free"
daemon_stop
