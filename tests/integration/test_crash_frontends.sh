#!/usr/bin/env bash
# Sync writes through the front ends under SIGKILL: what a client was told is durable
# is there after the crash.
#
# Each round runs four clients against one cairnd at once: NFSv3 FILE_SYNC writes
# (libnfs, O_SYNC), NFSv3 UNSTABLE writes made durable by COMMIT, NFSv4.1 FILE_SYNC4
# writes (nfs4_rpc.py: libnfs 4.0 speaks no 4.1 and sends its v4 O_SYNC writes as
# DATA_SYNC4), and iSCSI writes with FUA or followed by SYNCHRONIZE CACHE (libiscsi).
# Each client prints a record's index only after the server acknowledged it durable.
# cairnd is killed with SIGKILL at a random moment while all four write; txg_timeout
# is 300 s, so nearly all of it lives only in the intent log. After the restart every
# acknowledged record of this round and of every earlier round (NFS files) must read
# back exactly, the NFSv4.1 ones over NFSv4.1: the restarted server is in grace for
# the writer's client, which the verifier (the same client owner) ends with
# RECLAIM_COMPLETE, as a real client would. Replaying after each restart reads every
# log chain up to its unwritten end, which must charge no checksum error to either side
# of the mirror (`pool status`). At the end the pool is exported and `cairn check` must
# pass.
# Rounds: 4 normally, 30 with CAIRN_TEST_LONG=1 (or CAIRN_CRASH_ROUNDS).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

ISCSI="$CAIRN_BIN/iscsi_client"
TGT=iqn.2026-11.org.cairn.test:crash
rounds=${CAIRN_CRASH_ROUNDS:-4}
cairn_long && rounds=${CAIRN_CRASH_ROUNDS:-30}
P=127.0.0.1:$(cairn_random_port)

sparse_files "$T/dev" 1G a b
nfs_daemon_start d1 --iscsi-listen "$P"
run_ok "$CAIRN" pool create -o txg_timeout=300 tank mirror "$T/dev/a" "$T/dev/b"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
run_ok "$CAIRN" create -s -V 64M tank/vol
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" tank/vol

# lines FILE: how many records a client has acknowledged so far.
lines() { wc -l <"$1" 2>/dev/null || echo 0; }

declare -a SYNC_N COMMIT_N V41_N
for r in $(seq 1 "$rounds"); do
    URL=$(nfs_url /tank/share)
    "$NFSCLIENT" "$URL" syncwrite "r$r.sync" >"$T/sync.$r" 2>"$T/sync.$r.err" &
    p_sync=$!
    "$NFSCLIENT" "$URL" commitwrite "r$r.commit" >"$T/commit.$r" 2>"$T/commit.$r.err" &
    p_commit=$!
    $NFS4RPC 127.0.0.1 "$NFS_PORT" /tank/share crash-v41 syncwrite "r$r.v41" \
        >"$T/v41.$r" 2>"$T/v41.$r.err" &
    p_v41=$!
    "$ISCSI" syncwrite "$P" "$TGT" "$r" >"$T/lun.$r" 2>"$T/lun.$r.err" &
    p_lun=$!
    # Kill once every client has had some acknowledged, at a varying depth.
    want=$(( 4 + RANDOM % 24 ))
    for _ in $(seq 1 300); do
        [ "$(lines "$T/sync.$r")" -ge "$want" ] && [ "$(lines "$T/commit.$r")" -ge "$want" ] &&
            [ "$(lines "$T/v41.$r")" -ge "$want" ] && [ "$(lines "$T/lun.$r")" -ge "$want" ] && break
        sleep 0.05
    done
    sleep "0.0$(( RANDOM % 10 ))"
    daemon_kill9
    # The clients would retry against a dead server forever: stop them, then count.
    kill -9 "$p_sync" "$p_commit" "$p_v41" "$p_lun" 2>/dev/null || true
    wait "$p_sync" "$p_commit" "$p_v41" "$p_lun" 2>/dev/null || true
    SYNC_N[$r]=$(lines "$T/sync.$r")
    COMMIT_N[$r]=$(lines "$T/commit.$r")
    V41_N[$r]=$(lines "$T/v41.$r")
    lun_n=$(lines "$T/lun.$r")
    for f in sync commit v41 lun; do
        [ "$(lines "$T/$f.$r")" -ge 1 ] || fail "round $r: no $f write acknowledged: $(cat "$T/$f.$r.err")"
    done

    nfs_daemon_start d1 --iscsi-listen "$P"
    # Replay read every chain up to its unwritten end: expected, not a checksum error.
    run_ok "$CAIRN" pool status tank
    for leaf in "$T/dev/a" "$T/dev/b"; do
        row=$(leaf_row "$leaf")
        [ "$(echo "$row" | awk '{print $4}')" = 0 ] ||
            fail "round $r: replay charged checksum errors to $leaf (STATE READ WRITE CKSUM: $row)"
    done
    URL=$(nfs_url /tank/share)
    for k in $(seq 1 "$r"); do
        nfs_client "$URL" verify "r$k.sync" "${SYNC_N[$k]}"
        nfs_client "$URL" verify "r$k.commit" "${COMMIT_N[$k]}"
        nfs4_rpc /tank/share crash-v41 verify "r$k.v41" "${V41_N[$k]}"
    done
    "$ISCSI" verify "$P" "$TGT" "$r" "$lun_n" ||
        fail "round $r: an acknowledged iSCSI write (of $lun_n) is missing after SIGKILL"
    pass "round $r: ${SYNC_N[$r]} FILE_SYNC, ${COMMIT_N[$r]} COMMITted, ${V41_N[$r]} NFSv4.1 FILE_SYNC4, $lun_n FUA/SYNCHRONIZE CACHE writes survived SIGKILL"
done

# The sessions of the verifying clients end asynchronously; export waits for them.
for _ in $(seq 50); do
    "$CAIRN" pool export tank 2>/dev/null && break
    sleep 0.2
done
"$CAIRN" pool list -H 2>/dev/null | grep -q '^tank' && fail "pool export: $("$CAIRN" pool export tank 2>&1)"
daemon_stop
run_ok "$CAIRN" check -d "$T/dev" tank
pass "cairn check after $rounds crashes"
