#!/usr/bin/env bash
# Intent-log records of namespace and attribute operations under SIGKILL.
#
# A library writer (cairn_fsnslog writer: three threads, each making a random but
# reproducible sequence of creates, EXCLUSIVE creates, mkdirs, symlinks, removes,
# rmdirs, renames across directories and over existing files, links, setattrs,
# truncates and writes in its own directories, each followed by zpl_commit) records
# every acknowledged operation and the handle of every node it created, and is killed
# with kill -9 at a random moment, many times. txg_timeout is 300 s, so what it
# acknowledged is in the intent log, not in a synced txg. After every kill,
# cairn_fsnslog verify imports the pool (mounting replays the log) and requires every
# directory of every round to be exactly its model after the last acknowledged
# operation or after the one in flight - names, types, modes, owners, link counts,
# sizes, bytes, symlink targets, shared nodes - with the handles of acknowledged
# creates resolving (stale once freed); its offline check and `cairn check` must pass.
# Rounds: 5 normally, 50 with CAIRN_TEST_LONG=1 (or CAIRN_CRASH_ROUNDS).
#
# Part 2, through NFS: an NFSv3 client (nfs_ns_crash.py) CREATEs (GUARDED and
# EXCLUSIVE), RENAMEs, SETATTRs, LINKs and REMOVEs, recording every reply and handle,
# while cairnd is killed with kill -9; restarted, the daemon brings the pool back
# (replaying the log) and every acknowledged name must resolve to the handle the client
# was given before the crash, with its mode; removed names stay gone, handles of
# removed files are stale. Then `cairn check`. Rounds: 3, 20 with CAIRN_TEST_LONG=1.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

NSLOG="$CAIRN_BIN/cairn_fsnslog"
rounds=${CAIRN_CRASH_ROUNDS:-5}
cairn_long && rounds=${CAIRN_CRASH_ROUNDS:-50}

sparse_files "$T/p" 256M a b
daemon_start d1
run_ok "$CAIRN" pool create -o txg_timeout=300 zilns mirror "$T/p/a" "$T/p/b"
run_ok "$CAIRN" pool export zilns
daemon_stop
ack="$T/acks"
: >"$ack"

verify() {
    if ! "$NSLOG" verify -d "$T/p" zilns --ack "$ack" >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
        fail "cairn_fsnslog verify: $(grep -v ' INFO ' "$LAST_STDERR" | tail -n 5) $(tail -n 5 "$LAST_STDOUT")"
    fi
}

replayed_rounds=0
for r in $(seq 1 "$rounds"); do
    out="$T/writer.$r.out"
    "$NSLOG" writer -d "$T/p" zilns --ack "$ack" --round "$r" >"$out" 2>"$T/writer.$r.err" &
    wpid=$!
    # Kill only once the writers are under way (operations of this round acknowledged),
    # then at a random moment: a fixed pause after "ready" gave a loaded machine's
    # writers too few operations to replay.
    for i in $(seq 1 3000); do
        [ "$(grep -c "^A $r " "$ack")" -gt 16 ] && break
        kill -0 "$wpid" 2>/dev/null || break
        sleep 0.02
    done
    ms=$((RANDOM % 1200))
    sleep_ms "$ms"
    kill -0 "$wpid" 2>/dev/null || fail "round $r: the writer died by itself: $(grep -v ' INFO ' "$T/writer.$r.err" | tail -n 20)"
    kill -9 "$wpid"
    wait "$wpid" 2>/dev/null || true
    wait_unlocked "$T/p"/a "$T/p"/b
    verify
    # The point of the test: what was acknowledged came back through the log. A round
    # may replay nothing when the kill lands just after the log filled up and the
    # writers waited for a txg instead (as they must), so most rounds, not all, must.
    replay=$(grep -o ' zil: .*replayed [0-9]*' "$LAST_STDERR" | grep -o '[0-9]*$' | tail -n 1 || true)
    [ "${replay:-0}" -gt 0 ] && replayed_rounds=$((replayed_rounds + 1))
    echo "round $r: killed ${ms} ms into the writes: replayed ${replay:-0} records: $(cat "$LAST_STDOUT")"
    check_clean zilns "$T/p"
done
[ $((replayed_rounds * 2)) -gt "$rounds" ] ||
    fail "only $replayed_rounds of $rounds imports replayed records: the kills did not test the log"
acked=$(grep -c '^A ' "$ack")
[ "$acked" -gt 200 ] || fail "the writers acknowledged little ($acked operations): the rounds proved nothing"
pass "$rounds SIGKILL rounds: $acked acknowledged namespace, attribute and data operations survived exactly; check clean"

# ---- Part 2: cairnd killed under an NFS client ----
NSCRASH="python3 $CAIRN_SRC/tests/integration/nfs_ns_crash.py"
nfs_rounds=3
cairn_long && nfs_rounds=20
sparse_files "$T/n" 256M a b
nfs_daemon_start d2
run_ok "$CAIRN" pool create -o txg_timeout=300 zilnfs mirror "$T/n/a" "$T/n/b"
run_ok "$CAIRN" create -o sharenfs=no_root_squash zilnfs/share
acks=()
for r in $(seq 1 "$nfs_rounds"); do
    acks+=("$T/nfs.$r.acks")
    $NSCRASH 127.0.0.1 "$NFS_PORT" "$MOUNT_PORT" "$PMAP_PORT" /zilnfs/share ops "d$r" \
        >"$T/nfs.$r.acks" 2>"$T/nfs.$r.err" &
    cpid=$!
    # The first replies may wait for the mount (and its replay) of the last round; the
    # kill comes once more than 10 are in (what the round needs to prove anything),
    # then at a random moment: a fixed pause after the third CREATE was not always
    # enough replies on a loaded machine.
    for i in $(seq 1 1200); do
        [ "$(grep -c '^[CRMLD] ' "$T/nfs.$r.acks" 2>/dev/null)" -gt 10 ] && break
        kill -0 "$cpid" 2>/dev/null || break
        sleep 0.05
    done
    sleep_ms $((RANDOM % 800))
    daemon_kill9
    wait "$cpid" || fail "round $r: the NFS client failed: $(tail -n 3 "$T/nfs.$r.err")"
    n=$(grep -c '^[CRMLD] ' "$T/nfs.$r.acks" || true)
    [ "$n" -gt 10 ] || fail "round $r: the client had only $n replies before the kill: $(tail -n 3 "$T/nfs.$r.err") $(tail -n 8 "$T/d2.daemon.log")"
    mark=$(wc -l <"$T/d2.daemon.log")
    nfs_daemon_start d2
    tail -n +"$((mark + 1))" "$T/d2.daemon.log" | grep -q ' zil: .*replaying' ||
        fail "round $r: the restart replayed no intent log: $(tail -n +"$((mark + 1))" "$T/d2.daemon.log" | grep -E 'zil|zpl|WARN|ERROR' | tail -n 5)"
    nfs_rpc_check() {
        if ! $NSCRASH 127.0.0.1 "$NFS_PORT" "$MOUNT_PORT" "$PMAP_PORT" /zilnfs/share check "${acks[@]}" \
            >"$LAST_STDOUT" 2>"$LAST_STDERR"; then
            fail "round $r: $(cat "$LAST_STDERR")"
        fi
    }
    nfs_rpc_check
    echo "round $r (NFS): $n replies before the kill; $(cat "$LAST_STDOUT")"
done
run_ok "$CAIRN" pool export zilnfs
daemon_stop
check_clean zilnfs "$T/n"
pass "$nfs_rounds cairnd SIGKILLs under an NFS client: acknowledged names and their handles survived; check clean"
