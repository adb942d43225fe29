#!/usr/bin/env bash
# A client that reconnects while cairnd starts again after a crash never hears
# "stale file handle": the NFS port takes connections before the shares are
# exported (a test knob widens that window to 1.5 s), and a call with a handle
# kept from before the crash is answered only once its export is back. Each round
# kills the daemon with SIGKILL and hammers GETATTR and WRITE with the saved handle
# from the first moment the port takes a connection.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

sparse_files "$T/dev" 4G a
P=$(cairn_random_port)
PORTS=(--nfs-listen "127.0.0.1:$P" --mount-listen "127.0.0.1:$((P + 1))"
       --portmap-listen "127.0.0.1:$((P + 2))" --iscsi-listen "127.0.0.1:$((P + 3))")
nfs_daemon_start d1 "${PORTS[@]}"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
nfs_client "$(nfs_url /tank/share)" put kept.txt "survives crashes"
nfs_rpc /tank/share savefh kept.txt
FH=$(cat "$LAST_STDOUT")

for round in 1 2 3; do
    daemon_kill9
    wait_unlocked "$T/dev/a"
    $NFSRPC 127.0.0.1 "$NFS_PORT" "$MOUNT_PORT" "$PMAP_PORT" /tank/share hammer "$FH" 200 \
        >"$T/hammer.$round" 2>&1 &
    HPID=$!
    export CAIRND_DEBUG_DELAY_EXPORTS_MS=1500
    nfs_daemon_start d1 "${PORTS[@]}"
    unset CAIRND_DEBUG_DELAY_EXPORTS_MS
    grep -q 'CAIRND_DEBUG_DELAY_EXPORTS_MS' "$T/d1.daemon.log" ||
        fail "round $round: the daemon ignored the delay knob"
    wait "$HPID" || fail "round $round: $(cat "$T/hammer.$round")"
    pass "round $round: $(cat "$T/hammer.$round")"
done
nfs_client "$(nfs_url /tank/share)" get kept.txt
pass "after SIGKILL restarts a saved handle is never answered STALE"
