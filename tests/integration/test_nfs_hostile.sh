#!/usr/bin/env bash
# Hostile clients: huge fragment headers, oversized records, non-calls, half records
# left hanging (slowloris), 200 pipelined calls on one connection, 1 MiB READs of
# cached data left unread (queued with the ARC's buffers) while the file is rewritten
# and its old blocks freed, and 300 randomized garbage calls; after each, a
# well-behaved client is still served and the daemon stops cleanly.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

sparse_files "$T/dev" 4G a
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
nfs_rpc /tank/share hostile
nfs_rpc /tank/share rpc
nfs_client "$(nfs_url /tank/share)" basic
daemon_stop
pass "hostile input: others served throughout, clean stop"
