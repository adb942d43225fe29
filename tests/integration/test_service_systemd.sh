#!/usr/bin/env bash
# cairnd as a systemd service: the unit passes systemd-analyze, the sd_notify
# protocol (READY after the pools are back, STATUS, watchdog pings, STOPPING) is
# spoken to a NOTIFY_SOCKET as systemd would provide it, the log carries journal
# priorities when stderr is the journal stream, and the syslog / log_file copies
# and the default /etc/cairn/cairnd.conf work. No systemd runs here as PID 1, so
# the test stands in for it with a datagram socket and a private mount namespace.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
LISTEN="$CAIRN_SRC/tests/integration/dgram_listen.py"

# wait_line FILE REGEX [TRIES]: polls FILE (0.1 s steps) until a line matches.
wait_line() {
    local i
    for i in $(seq 1 "${3:-200}"); do
        grep -qE "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    fail "no line matching '$2' in $1: $(tail -n 5 "$1" 2>/dev/null | tr '\n' ' ')"
}

# --- the unit file, as installed but pointing at this build's daemon.
sed "s|^ExecStart=[^ ]*|ExecStart=$CAIRND|" "$CAIRN_BIN/cairnd.service" >"$T/cairnd.service"
grep -q '^Type=notify$' "$T/cairnd.service" || fail "unit is not Type=notify"
grep -q '^WatchdogSec=' "$T/cairnd.service" || fail "unit sets no watchdog"
systemd-analyze verify "$T/cairnd.service" >"$T/verify.out" 2>&1 ||
    fail "systemd-analyze verify: $(cat "$T/verify.out")"
pass "unit file verifies"

# --- sd_notify: a pool to import at start, then a daemon under a fake systemd.
daemon_start prep
sparse_files "$T" 256M d0
run_ok "$CAIRN" pool create svc "$T/d0"
daemon_stop

python3 "$LISTEN" "$T/notify.sock" "$T/notify.out" &
LISTENER=$!
CAIRN_DAEMON_PIDS+=("$LISTENER")
for i in $(seq 1 50); do [ -S "$T/notify.sock" ] && break; sleep 0.1; done
NOTIFY_SOCKET="$T/notify.sock" WATCHDOG_USEC=1000000 daemon_start prep
wait_line "$T/notify.out" '(^|\|)READY=1'
grep -n 'STATUS=importing pools' "$T/notify.out" >/dev/null || fail "no STATUS before READY"
[ "$(grep -n 'STATUS=importing pools' "$T/notify.out" | head -1 | cut -d: -f1)" -lt \
  "$(grep -nE '(^|\|)READY=1' "$T/notify.out" | head -1 | cut -d: -f1)" ] ||
    fail "READY=1 came before the pools were imported"
# READY means served: the cached pool is back (and it was imported before READY).
run_ok "$CAIRN" pool list -H
expect_stdout '^svc\s'
pass "READY=1 after STATUS=importing pools, pool imported"
# With a 1 s watchdog the main loop pings every 0.5 s: wait for three more.
base=$(grep -c '^WATCHDOG=1$' "$T/notify.out" || true)
for i in $(seq 1 300); do
    [ "$(grep -c '^WATCHDOG=1$' "$T/notify.out" || true)" -ge $((base + 3)) ] && break
    sleep 0.1
done
[ "$(grep -c '^WATCHDOG=1$' "$T/notify.out" || true)" -ge $((base + 3)) ] ||
    fail "watchdog pings stopped: $(grep -c WATCHDOG=1 "$T/notify.out") in all"
pass "watchdog pings from the main loop"
daemon_stop
wait_line "$T/notify.out" '(^|\|)STOPPING=1'
pass "STOPPING=1 on SIGTERM, clean exit"

# Without NOTIFY_SOCKET nothing changes (every other test runs that way).

# --- journal priorities: stderr is the stream JOURNAL_STREAM names.
: >"$T/jr.daemon.log"
JOURNAL_STREAM=$(stat -c '%d:%i' "$T/jr.daemon.log") daemon_start jr
daemon_stop
grep -q '^<6>cairnd: ready$' "$T/jr.daemon.log" ||
    fail "no '<6>cairnd: ready' line: $(head -3 "$T/jr.daemon.log")"
! grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' "$T/jr.daemon.log" ||
    fail "timestamps in the journal stream"
# A JOURNAL_STREAM naming another file (a child's inherited value) is ignored.
JOURNAL_STREAM=1:1 daemon_start jr2
daemon_stop
grep -qE '^[0-9]{4}-[0-9-]+T[0-9:.]+Z INFO cairnd: ready$' "$T/jr2.daemon.log" ||
    fail "plain log lines lost: $(head -3 "$T/jr2.daemon.log")"
pass "journal priority prefixes only on the journal stream"

# --- log_file copies every line; a log_file that cannot open stops the start.
cat >"$T/logfile.conf" <<CONF
log_file = $T/extra.log
CONF
daemon_start lf --config "$T/logfile.conf"
daemon_stop
grep -qE 'INFO cairnd: ready$' "$T/extra.log" || fail "log_file has no ready line"
grep -qE 'INFO cairnd: stopped$' "$T/extra.log" || fail "log_file has no stopped line"
# daemon_refuses CONF MESSAGE: cairnd exits 1 at once with that one line.
daemon_refuses() {
    local rc=0
    "$CAIRND" --foreground --config "$1" --state-dir "$T/bad" >/dev/null 2>"$T/refused" || rc=$?
    [ "$rc" -eq 1 ] || fail "cairnd with $1 exited $rc"
    [ "$(cat "$T/refused")" = "$2" ] || fail "cairnd said '$(cat "$T/refused")', not '$2'"
}
echo "log_file = $T/no/such/dir/x.log" >"$T/badlog.conf"
daemon_refuses "$T/badlog.conf" "cairnd: cannot open log_file $T/no/such/dir/x.log: No such file or directory"
echo "log_syslog = maybe" >"$T/badsys.conf"
daemon_refuses "$T/badsys.conf" "cairnd: $T/badsys.conf:1: bad log_syslog 'maybe' (want on or off)"
pass "log_file copy; bad log settings refused"

# --- syslog and the default config, in a private mount namespace: a /dev of our
# own holds the /dev/log we listen on, and /etc/cairn shows our config only there.
made_etc=0
if [ ! -d /etc/cairn ]; then mkdir /etc/cairn; made_etc=1; fi
mkdir -p "$T/etc-cairn" "$T/olddev"
P=$(cairn_random_port)
cat >"$T/etc-cairn/cairnd.conf" <<CONF
state_dir = $T/nsd
log_syslog = on
nfs_listen = 127.0.0.1:$P
mount_listen = 127.0.0.1:$((P + 1))
portmap_listen = 127.0.0.1:$((P + 2))
iscsi_listen = 127.0.0.1:$((P + 3))
CONF
rc=0
unshare -m bash -c '
    set -e
    T=$1 CAIRND=$2 CAIRN=$3 LISTEN=$4
    mount --rbind /dev "$T/olddev"
    mount -t tmpfs tmpfs /dev
    for n in null zero random urandom; do touch "/dev/$n"; mount --bind "$T/olddev/$n" "/dev/$n"; done
    mount --bind "$T/etc-cairn" /etc/cairn
    python3 "$LISTEN" /dev/log "$T/syslog.out" & lp=$!
    for i in $(seq 1 50); do [ -S /dev/log ] && break; sleep 0.1; done
    "$CAIRND" --foreground 2>"$T/ns.log" & dp=$!
    for i in $(seq 1 300); do
        CAIRN_SOCKET="$T/nsd/cairnd.sock" "$CAIRN" pool list >/dev/null 2>&1 && break
        kill -0 $dp || exit 3
        sleep 0.1
    done
    kill -TERM $dp; wait $dp
    kill $lp
' ns "$T" "$CAIRND" "$CAIRN" "$LISTEN" || rc=$?
[ "$made_etc" = 1 ] && rmdir /etc/cairn
[ "$rc" -eq 0 ] || fail "daemon in the namespace failed ($rc): $(tail -n 5 "$T/ns.log")"
[ -S "$T/nsd/cairnd.sock" ] || [ -e "$T/nsd/cairnd.lock" ] ||
    fail "/etc/cairn/cairnd.conf not read (state dir $T/nsd unused)"
grep -qE 'cairnd\[[0-9]+\]: cairnd: ready$' "$T/syslog.out" ||
    fail "no ready line in syslog: $(head -3 "$T/syslog.out" 2>/dev/null)"
grep -qE '^<30>' "$T/syslog.out" || fail "syslog lines not at daemon.info: $(head -1 "$T/syslog.out")"
pass "default /etc/cairn/cairnd.conf read; log_syslog = on reaches syslog at daemon.info"
