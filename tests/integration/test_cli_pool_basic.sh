#!/usr/bin/env bash
# The pool life cycle through the CLI: create single/mirror/raidz pools from sparse
# files, list (human, -H, -p, --json), status, get/set, export, import -d, destroy,
# and the daemon bringing pools back after a clean restart and after kill -9.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

sparse_files "$T/p1" 128M a
sparse_files "$T/p2" 128M a b
sparse_files "$T/p3" 128M a b c d
daemon_start d1

run_ok "$CAIRN" pool create p1 "$T/p1/a"
(cd "$T/p2" && run_ok "$CAIRN" pool create p2 mirror a b)   # relative paths made absolute
run_ok "$CAIRN" pool create -o comment=third p3 raidz2 "$T/p3/a" "$T/p3/b" "$T/p3/c" "$T/p3/d"
pass "create single, mirror, raidz2"

run_ok "$CAIRN" pool list
expect_stdout '^NAME +SIZE +ALLOC +FREE +CAP +RATIO +HEALTH +EXPANDSZ$'
expect_stdout '^p1 .* 1\.00x +ONLINE +-$'   # RATIO: the root dataset's compressratio
for p in p1 p2 p3; do expect_stdout "^$p .*ONLINE +-$"; done
run_ok "$CAIRN" pool list -H -p p2
awk -F'\t' 'NF != 8 || $1 != "p2" || $2 !~ /^[0-9]+$/ || $2 < 64*1024*1024 || $6 != "1.00" || $7 != "ONLINE" || $8 != "0" { exit 1 }' \
    "$LAST_STDOUT" || fail "pool list -H -p: $(cat "$LAST_STDOUT")"
[ "$(wc -l <"$LAST_STDOUT")" -eq 1 ] || fail "pool list -H printed a header or extra rows"
run_ok "$CAIRN" pool list --json
python3 - "$LAST_STDOUT" <<'PY' || fail "pool list --json: $(cat "$LAST_STDOUT")"
import json, sys
d = json.load(open(sys.argv[1]))
names = sorted(p["name"] for p in d["pools"])
assert names == ["p1", "p2", "p3"], names
for p in d["pools"]:
    assert isinstance(p["size"], int) and p["size"] >= p["alloc"] and p["health"] == "ONLINE", p
    assert p["size"] == p["alloc"] + p["free"], p
PY
pass "list in three formats"

run_ok "$CAIRN" pool status p2
expect_stdout '^  pool: p2$'
expect_stdout '^ state: ONLINE$'
expect_stdout '^  scan: none requested$'
expect_stdout 'NAME +STATE +READ +WRITE +CKSUM'
expect_stdout "^	  mirror-0 +ONLINE +0 +0 +0\$"
expect_stdout "^	    $T/p2/a +ONLINE +0 +0 +0\$"
expect_stdout "^	    $T/p2/b +ONLINE"
expect_stdout '^errors: No known data errors$'
run_ok "$CAIRN" pool status
expect_stdout 'raidz2-0'
pass "status shows the vdev tree"

run_ok "$CAIRN" pool get comment p3
expect_stdout '^p3 +comment +third +local$'
run_ok "$CAIRN" pool set comment=hello p1
run_ok "$CAIRN" pool get -H comment p1
[ "$(cat "$LAST_STDOUT")" = "$(printf 'p1\tcomment\thello\tlocal')" ] || fail "get -H: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool get -H -p size,guid p1
awk -F'\t' '$3 !~ /^[0-9]+$/ { exit 1 }' "$LAST_STDOUT" || fail "get -p: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool get --json all p1
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert any(p["property"]=="comment" and p["value"]=="hello" for p in d["properties"])' "$LAST_STDOUT" \
    || fail "get --json all: $(cat "$LAST_STDOUT")"
# dirty_max: a tenth of memory (256 MiB to 4 GiB) until an administrator sets one,
# and only a value set is kept in the labels.
mem=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
dirty_default=$(python3 -c 'import sys; print(min(max(int(sys.argv[1]) * 1024 // 10, 256 << 20), 4 << 30))' "$mem")
run_ok "$CAIRN" pool get -H -p dirty_max p2
[ "$(cat "$LAST_STDOUT")" = "$(printf 'p2\tdirty_max\t%s\tdefault' "$dirty_default")" ] \
    || fail "dirty_max default: $(cat "$LAST_STDOUT"), want $dirty_default"
run_ok "$CAIRN" pool get -H -p txg_timeout p2
expect_stdout '	5	default$'
run_ok "$CAIRN" pool set txg_timeout=7 p2
run_ok "$CAIRN" pool get -H -p txg_timeout p2
expect_stdout '	7	local$'
run_ok "$CAIRN" pool set dirty_max=512M p1
run_ok "$CAIRN" pool get -H -p dirty_max p1
[ "$(cat "$LAST_STDOUT")" = "$(printf 'p1\tdirty_max\t536870912\tlocal')" ] || fail "dirty_max set: $(cat "$LAST_STDOUT")"
pass "get and set"

run_ok "$CAIRN" pool scrub p2
for i in $(seq 1 300); do
    "$CAIRN" pool status p2 | grep -q 'scrub repaired' && break
    sleep 0.1
done
run_ok "$CAIRN" pool status p2
expect_stdout 'scan: scrub repaired 0 in .* with 0 errors'
run_ok "$CAIRN" pool clear p2
pass "scrub and clear"

run_ok "$CAIRN" pool export p1
run_ok "$CAIRN" pool list -H
grep -q '^p1	' "$LAST_STDOUT" && fail "p1 still listed after export"
run_ok "$CAIRN" pool import -d "$T/p1"
expect_stdout '^p1 +[0-9]+ +exported'
run_ok "$CAIRN" pool import -d "$T/p1" p1
run_ok "$CAIRN" pool get -H comment p1
expect_stdout 'hello'
run_ok "$CAIRN" pool get -H -p dirty_max p1
expect_stdout '	536870912	local$'
pass "export and import keep the pool's properties"

run_ok "$CAIRN" pool destroy p3
run_ok "$CAIRN" pool list -H
grep -q '^p3	' "$LAST_STDOUT" && fail "p3 still listed after destroy"
run_fail "$CAIRN" pool import -d "$T/p3" p3
# Destroyed devices are free for a new pool without -f.
run_ok "$CAIRN" pool create p3 raidz1 "$T/p3/a" "$T/p3/b" "$T/p3/c"
pass "destroy frees the devices"

# Clean restart: the cache brings every pool back.
daemon_stop
[ -e "$T/d1/cairnd.sock" ] && fail "socket left behind after SIGTERM"
daemon_start d1
run_ok "$CAIRN" pool list -H
for p in p1 p2 p3; do grep -q "^$p	" "$LAST_STDOUT" || fail "$p missing after restart"; done
run_ok "$CAIRN" pool get -H -p dirty_max p2
expect_stdout "	$dirty_default	default\$"
pass "restart restores pools"

# Crash: kill -9, restart, pools are back.
daemon_kill9
daemon_start d1
run_ok "$CAIRN" pool list -H
for p in p1 p2 p3; do grep -q "^$p	.*ONLINE" "$LAST_STDOUT" || fail "$p missing after kill -9"; done
run_ok "$CAIRN" pool get -H comment p1
expect_stdout 'hello'
pass "kill -9 and restart restores pools"

# A second daemon on the same state dir is refused; one on its own runs side by side.
run_fail_d() { local rc=0; "$@" 2>"$LAST_STDERR" || rc=$?; [ $rc -ne 0 ] || fail "expected failure: $*"; }
run_fail_d "$CAIRND" --foreground --state-dir "$T/d1" --socket "$T/d1/x.sock"
expect_stderr 'another cairnd is running'
sock1=$CAIRN_SOCKET pid1=$DAEMON_PID
daemon_start d2
run_ok "$CAIRN" pool list
expect_stdout 'no pools available'
daemon_stop
export CAIRN_SOCKET=$sock1 DAEMON_PID=$pid1
pass "side-by-side daemons"

# Export for the offline check; it needs no daemon.
run_ok "$CAIRN" pool export p2
daemon_stop
run_ok "$CAIRN" check -d "$T/p2" p2
expect_stdout '^result: +clean$'
pass "offline check of an exported pool"

# Daemonized start: returns once serving, writes a pid file, stops on SIGTERM.
dp=$(cairn_random_port)
"$CAIRND" --state-dir "$T/d3" --nfs-listen "127.0.0.1:$dp" --mount-listen "127.0.0.1:$((dp + 1))" \
    --portmap-listen "127.0.0.1:$((dp + 2))" --iscsi-listen "127.0.0.1:$((dp + 3))" \
    2>"$LAST_STDERR" || fail "daemonized start: $(cat "$LAST_STDERR")"
pid=$(cat "$T/d3/cairnd.pid")
CAIRN_DAEMON_PIDS+=("$pid")
export CAIRN_SOCKET="$T/d3/cairnd.sock"
run_ok "$CAIRN" pool list
[ "$(stat -c %a "$T/d3/cairnd.sock")" = 600 ] || fail "socket mode is not 0600"
[ "$(stat -c %a "$T/d3")" = 700 ] || fail "state dir mode is not 0700"
kill -TERM "$pid"
for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "daemonized cairnd did not stop on SIGTERM"
grep -q 'INFO cairnd: ready' "$T/d3/cairnd.log" || fail "no log in state dir"
pass "daemonized mode"

# Config errors name file:line.
printf 'state_dir = %s\nbogus_key = 1\n' "$T/d4" >"$T/bad.conf"
run_fail_d "$CAIRND" --foreground --config "$T/bad.conf"
expect_stderr "^cairnd: $T/bad.conf:2: unknown setting 'bogus_key'"
run_fail_d "$CAIRND" --foreground --state-dir "$T/d4" --nfs-listen 1.2.3.4:70000
expect_stderr 'nfs_listen'
printf 'state_dir = %s\nresilver_delay_ms = soon\n' "$T/d4" >"$T/bad.conf"
run_fail_d "$CAIRND" --foreground --config "$T/bad.conf"
expect_stderr "^cairnd: $T/bad.conf:2: bad resilver_delay_ms 'soon' .want milliseconds, 0..1000.$"
[ "$(wc -l <"$LAST_STDERR")" -eq 1 ] || fail "a bad throttle setting: more than one line: $(cat "$LAST_STDERR")"
pass "config errors"

# A front end that cannot listen stops the start with one line (NFS and iSCSI alike).
taken=$(cairn_random_port)
python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1); time.sleep(30)' "$taken" &
holder=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$taken") 2>/dev/null && break; sleep 0.1; done
for fe in nfs iscsi; do
    run_fail_d "$CAIRND" --foreground --state-dir "$T/d5" --nfs-listen "127.0.0.1:$((taken + 10))" \
        --mount-listen "127.0.0.1:$((taken + 11))" --portmap-listen "127.0.0.1:$((taken + 12))" \
        --iscsi-listen "127.0.0.1:$((taken + 13))" "--$fe-listen" "127.0.0.1:$taken"
    expect_stderr "127.0.0.1:$taken: Address already in use"
done
kill "$holder" 2>/dev/null || true
pass "a taken front-end port fails the start"
