#!/usr/bin/env bash
# A refused destroy, rename or rollback changes nothing a client can see: while
# such commands are refused over and over (children, snapshots, a dependent
# clone, a name taken, a move below itself, a snapshot not the newest), readers
# running nfs-cat on the share side by side never fail. cairnd used to take the
# share down before asking the DSL, and put it back after the refusal: readers
# then failed with "stale file handle" or a refused MOUNT. And one that is
# accepted but keeps the file (rollback to the newest snapshot, rename) makes a
# client holding its handle wait (JUKEBOX) at most, never answers STALE.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

sparse_files "$T/dev" 4G a
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
head -c 65536 /dev/urandom >"$T/data"
run_ok nfs-cp "$T/data" "$(nfs_url /tank/share/data)"
run_ok "$CAIRN" create tank/share/child
run_ok "$CAIRN" create tank/other
run_ok "$CAIRN" snapshot tank/share@s1
run_ok "$CAIRN" snapshot tank/share@s2
run_ok "$CAIRN" clone tank/share@s1 tank/clone
expect_share /tank/share
expect_share /tank/share/child

# Readers: each runs nfs-cat until told to stop and counts what it read right and wrong.
URL=$(nfs_url /tank/share/data)
reader() {
    local id=$1 good=0 bad=0
    while [ ! -e "$T/stop" ]; do
        if nfs-cat "$URL" >"$T/r$id.out" 2>"$T/r$id.err" && cmp -s "$T/r$id.out" "$T/data"; then
            good=$((good + 1))
        else
            bad=$((bad + 1))
            cp "$T/r$id.err" "$T/r$id.lasterr"
        fi
    done
    echo "$good $bad" >"$T/r$id.count"
}
NREADERS=6
PIDS=()
for i in $(seq 1 $NREADERS); do
    reader "$i" &
    PIDS+=($!)
done
# Every reader has read once before the commands start.
for i in $(seq 1 600); do
    [ "$(ls "$T"/r*.out 2>/dev/null | wc -l)" -ge "$NREADERS" ] && break
    sleep 0.05
done

for round in $(seq 1 8); do
    run_fail "$CAIRN" destroy tank/share
    expect_stderr "cannot destroy 'tank/share'"
    run_fail "$CAIRN" destroy -r tank/share
    expect_stderr "clone"
    run_fail "$CAIRN" rename tank/share tank/other
    expect_stderr "exists"
    run_fail "$CAIRN" rename tank/share tank/share/child/x
    run_fail "$CAIRN" rename tank/share tank/nothere/x
    run_fail "$CAIRN" rollback tank/share@s1
    expect_stderr "most recent"
done
touch "$T/stop"
for p in "${PIDS[@]}"; do wait "$p"; done

good=0 bad=0
for i in $(seq 1 $NREADERS); do
    read -r g b <"$T/r$i.count"
    good=$((good + g))
    bad=$((bad + b))
    [ "$b" -eq 0 ] || echo "reader $i: $b failures, last: $(cat "$T/r$i.lasterr")" >&2
done
[ "$good" -gt 0 ] || fail "the readers read nothing"
[ "$bad" -eq 0 ] || fail "$bad of $((good + bad)) reads failed while commands were refused"
pass "48 refused destroy/rename/rollback commands; $good concurrent reads, none failed"

# Nothing changed: the same datasets, the same shares, the file as it was.
expect_share /tank/share
expect_share /tank/share/child
run_ok nfs-cat "$URL"
cmp -s "$LAST_STDOUT" "$T/data" || fail "the file changed"
pass "refused commands left datasets and shares as they were"

# And what is accepted still happens.
run_ok "$CAIRN" rename tank/share/child tank/share/kid
expect_share /tank/share/kid
expect_no_share /tank/share/child
run_ok "$CAIRN" destroy tank/share/kid
expect_no_share /tank/share/kid
run_ok "$CAIRN" destroy tank/share@s2
run_ok "$CAIRN" rollback tank/share@s1
expect_share /tank/share
run_ok nfs-cat "$URL"
cmp -s "$LAST_STDOUT" "$T/data" || fail "the file changed by the rollback"
pass "accepted destroy, rename and rollback still take effect"

# ---- accepted rollback and rename: a handle the dataset keeps never goes stale ----
nfs_rpc /tank/share savefh data
FH=$(cat "$LAST_STDOUT")
rm -f "$T/stop"
$NFSRPC 127.0.0.1 "$NFS_PORT" "$MOUNT_PORT" "$PMAP_PORT" /tank/share watch "$FH" "$T/stop" \
    >"$T/watch" 2>&1 &
WPID=$!
sleep_ms 200
for i in $(seq 1 5); do
    run_ok "$CAIRN" snapshot "tank/share@r$i"
    run_ok "$CAIRN" rollback "tank/share@r$i"
    run_ok "$CAIRN" rename tank/share tank/moved
    expect_share /tank/moved
    run_ok "$CAIRN" rename tank/moved tank/share
    expect_share /tank/share
done
touch "$T/stop"
wait "$WPID" || fail "while rolling back and renaming: $(cat "$T/watch")"
pass "5 rollbacks and 10 renames under a client: $(cat "$T/watch")"
