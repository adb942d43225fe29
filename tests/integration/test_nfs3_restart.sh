#!/usr/bin/env bash
# Across daemon restarts: a file handle stays valid, the write verifier changes, and
# SIGKILL during FILE_SYNC writes loses no acknowledged byte.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

sparse_files "$T/dev" 4G a
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
URL=$(nfs_url /tank/share)
nfs_client "$URL" put kept.txt "survives restarts"
nfs_rpc /tank/share savefh kept.txt
FH=$(cat "$LAST_STDOUT")
nfs_rpc /tank/share verifier
V1=$(cat "$LAST_STDOUT")

daemon_stop
nfs_daemon_start d1
nfs_rpc /tank/share usefh "$FH" 0
nfs_rpc /tank/share verifier
V2=$(cat "$LAST_STDOUT")
[ "$V1" != "$V2" ] || fail "the write verifier did not change across a restart ($V1)"
pass "file handle kept across a restart; write verifier changed"

# ---- SIGKILL during FILE_SYNC writes ----
URL=$(nfs_url /tank/share)
"$NFSCLIENT" "$URL" syncwrite sync.dat >"$T/acked" 2>"$T/writer.err" &
WPID=$!
for i in $(seq 1 100); do
    [ "$(wc -l <"$T/acked")" -ge 40 ] && break
    sleep 0.1
done
daemon_kill9
kill -9 "$WPID" 2>/dev/null || true   # libnfs would retry forever
wait "$WPID" 2>/dev/null || true
N=$(wc -l <"$T/acked")
[ "$N" -ge 1 ] || fail "no FILE_SYNC write was acknowledged: $(cat "$T/writer.err")"
nfs_daemon_start d1
nfs_client "$(nfs_url /tank/share)" verify sync.dat "$N"
nfs_rpc /tank/share usefh "$FH" 0
pass "SIGKILL during FILE_SYNC writes: all $N acknowledged records present"
