#!/usr/bin/env bash
# ocf:cairn:cairn-pool on its own, without a cluster: ocf-tester's whole
# protocol run (meta-data, validate-all, probe, start twice, monitor, stop twice,
# monitor) against a real pool, then the cases Pacemaker relies on: the agent
# starts the node's cairnd when none runs (without importing what its cache
# names), a stop with no cairnd is success, a daemon killed with SIGKILL reads as
# "not running" (so the pool moves), a second pool shares the daemon, and bad
# parameters are refused with OCF_ERR_CONFIGURED.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

AGENT="$CAIRN_SRC/conf/ocf/cairn-pool"
command -v ocf-tester >/dev/null || fail "ocf-tester is missing: run tools/install-deps (resource-agents)"
command -v xmllint >/dev/null || fail "xmllint is missing: run tools/install-deps (libxml2-utils)"

sparse_files "$T/disks" 1G a.img b.img
daemon_start setup
run_ok "$CAIRN" pool create hapa "$T/disks/a.img"
run_ok "$CAIRN" create -o sharenfs=on hapa/fs
run_ok "$CAIRN" pool create hapb "$T/disks/b.img"
run_ok "$CAIRN" pool export hapa
run_ok "$CAIRN" pool export hapb
daemon_stop

# The agent's cairnd: its own state dir and ports (beside other tests' daemons).
STATE="$T/node"
SOCK="$STATE/cairnd.sock"
p=$(cairn_random_port)
OPTS="--nfs-listen 127.0.0.1:$p --mount-listen 127.0.0.1:$((p + 1)) --portmap-listen 127.0.0.1:$((p + 2)) --iscsi-listen 127.0.0.1:$((p + 3))"
agent_cairnd() { fuser "$STATE/cairnd.lock" 2>/dev/null | tr -d ' ' || true; }
stop_agent_cairnd() {
    local pid; pid=$(agent_cairnd)
    # Gone once the lock is free (a daemonized cairnd's zombie may linger unreaped).
    [ -z "$pid" ] || { kill -9 "$pid"; while [ -n "$(agent_cairnd)" ]; do sleep 0.05; done; }
}
trap 'rc=$?; stop_agent_cairnd; (exit "$rc"); cairn_test_cleanup' EXIT

params=(-o pool=hapa -o "cairn=$CAIRN" -o "cairnd=$CAIRND" -o "state_dir=$STATE"
        -o "socket=$SOCK" -o "import_dirs=$T/disks" -o "daemon_options=$OPTS")
if ! ocf-tester -n pool_hapa "${params[@]}" "$AGENT" >"$T/ocf-tester.out" 2>&1; then
    cat "$T/ocf-tester.out" >&2
    fail "ocf-tester"
fi
grep -q "cairn-pool passed all tests" "$T/ocf-tester.out" || fail "ocf-tester: $(cat "$T/ocf-tester.out")"
pass "ocf-tester: all tests passed"

# ocf-tester left the daemon up with the pool exported.
export OCF_ROOT=/usr/lib/ocf OCF_RESKEY_pool=hapa OCF_RESKEY_cairn="$CAIRN" OCF_RESKEY_cairnd="$CAIRND"
export OCF_RESKEY_state_dir="$STATE" OCF_RESKEY_socket="$SOCK" OCF_RESKEY_import_dirs="$T/disks"
export OCF_RESKEY_daemon_options="$OPTS"
agent() { local rc=0; "$AGENT" "$@" >"$LAST_STDOUT" 2>"$LAST_STDERR" || rc=$?; echo "$rc"; }
expect_rc() { local want=$1; shift; local got; got=$(agent "$@"); [ "$got" = "$want" ] ||
    fail "cairn-pool $* returned $got, expected $want: $(cat "$LAST_STDERR")"; }

[ -n "$(agent_cairnd)" ] || fail "the agent did not start cairnd"
expect_rc 7 monitor
expect_rc 0 start
CAIRN_SOCKET=$SOCK run_ok "$CAIRN" share list -H
grep -q "/hapa/fs" "$LAST_STDOUT" || fail "hapa's share is not served after start"
OCF_RESKEY_pool=hapb expect_rc 0 start
OCF_CHECK_LEVEL=10 expect_rc 0 monitor
OCF_RESKEY_pool=hapb expect_rc 0 monitor
pass "two pools in the node's one cairnd; the pool's share comes back with it"

# cairnd killed: both pools read "not running", a stop is success, and the next
# start brings up a daemon that imported nothing by itself from its cache.
stop_agent_cairnd
expect_rc 7 monitor
expect_rc 0 stop
OCF_RESKEY_pool=hapb expect_rc 0 stop
expect_rc 0 start
CAIRN_SOCKET=$SOCK run_ok "$CAIRN" pool list -H
grep -q "^hapa" "$LAST_STDOUT" || fail "hapa is not imported after start"
! grep -q "^hapb" "$LAST_STDOUT" || fail "the restarted cairnd imported hapb from its cache"
OCF_RESKEY_pool=hapb expect_rc 7 monitor
pass "after kill -9 of cairnd: monitor 7, stop 0, start restarts cairnd without its cache"

expect_rc 0 stop
expect_rc 0 stop
stop_agent_cairnd
expect_rc 0 stop
pass "stop is idempotent, and success with no cairnd"

# A cairnd that holds its lock but does not answer (stopped here) is a failure, not
# "not running", and a stop kills it: it must not write once the partner imports.
expect_rc 0 start
hung=$(agent_cairnd)
kill -STOP "$hung"
expect_rc 1 monitor
expect_rc 0 stop
[ -z "$(agent_cairnd)" ] || fail "stop left the hung cairnd (pid $hung) running"
grep -q "does not answer; killing it" "$LAST_STDERR" || fail "stop did not say why it killed cairnd"
pass "a hung cairnd: monitor fails, stop kills it"

# Health, through a stand-in cairn that reports the pool in a given state (a real
# pool's faults are test_pool_fault's business): only a pool that cannot serve fails.
cat >"$T/fake-cairn" <<'FAKE'
#!/bin/sh
case "$*" in
*"pool list"*)
    case "$*" in *-H*) ;; *) printf 'NAME\tSIZE\tALLOC\tFREE\tCAP\tRATIO\tHEALTH\tEXPANDSZ\n';; esac
    printf 'hapa\t1G\t1M\t1G\t0%%\t1.00x\t%s\t-\n' "$FAKE_HEALTH";;
esac
FAKE
chmod +x "$T/fake-cairn"
for h in ONLINE DEGRADED; do
    FAKE_HEALTH=$h OCF_RESKEY_cairn="$T/fake-cairn" expect_rc 0 monitor
done
for h in FAULTED SUSPENDED UNAVAIL; do
    FAKE_HEALTH=$h OCF_RESKEY_cairn="$T/fake-cairn" expect_rc 1 monitor
done
pass "monitor: ONLINE and DEGRADED serve, FAULTED, SUSPENDED and UNAVAIL fail"

OCF_RESKEY_pool=nosuchpool expect_rc 1 start
[ -z "$(agent_cairnd)" ] || CAIRN_SOCKET=$SOCK run_ok "$CAIRN" pool list -H
! grep -q nosuchpool "$LAST_STDOUT" || fail "a missing pool was imported"
OCF_RESKEY_pool="" expect_rc 6 validate-all
OCF_RESKEY_pool="a/b" expect_rc 6 validate-all
OCF_RESKEY_drain_timeout=soon expect_rc 6 validate-all
OCF_RESKEY_import_dirs="$T/nowhere" expect_rc 6 validate-all
OCF_RESKEY_cairn=/nonexistent/cairn expect_rc 5 validate-all
OCF_RESKEY_cairn=/nonexistent/cairn expect_rc 0 stop
expect_rc 3 migrate_to
pass "bad parameters refused (6, 5), a missing pool fails to start, unknown actions 3"
