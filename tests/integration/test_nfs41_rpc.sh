#!/usr/bin/env bash
# NFSv4.1 operations that libnfs (an NFSv4.0 client) cannot send, through a raw client
# of our own (tests/integration/nfs4_rpc.py): sessions, RECLAIM_COMPLETE (once, then
# COMPLETE_ALREADY), DESTROY_SESSION and DESTROY_CLIENTID (refused while a session
# lives, stale afterwards), LOCKT against another client's lock (DENIED naming it) and
# a free range; the session and client-ID rules a well-behaved client never meets
# (nfs4_rpc.py session-rules); and RECLAIM_COMPLETE ending the grace period after a restart: a new
# client's OPEN waits with NFS4ERR_GRACE until the one client of the previous run says
# RECLAIM_COMPLETE, long before the 90 s grace would run out.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

sparse_files "$T/dev" 4G a
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
expect_share /tank/share

nfs4_rpc /tank/share "session-$$" session
pass "EXCHANGE_ID, CREATE_SESSION, SEQUENCE, RECLAIM_COMPLETE (twice: COMPLETE_ALREADY), DESTROY_CLIENTID (busy, then done, then stale), DESTROY_SESSION"
nfs4_rpc /tank/share "rules-$$" session-rules rulesfile
pass "session and client-ID rules: NOT_ONLY_OP, CREATE_SESSION flags/sizes/principal, EXCHANGE_ID collisions (PERM, CLID_INUSE, replacement), REQ/REP_TOO_BIG(_TO_CACHE), SECINFO_NO_NAME parent, RENAME from a file, current stateid, GRACE before RECLAIM_COMPLETE"
nfs4_rpc /tank/share "locks-$$" lockt locked
pass "LOCKT: DENIED with the holder's lock under another client's write lock, granted on a free range and to the holder, INVAL for length 0"

# ---- RECLAIM_COMPLETE ends grace ----
nfs4_rpc /tank/share "before-restart" open held 0
daemon_stop
nfs_daemon_start d1
nfs4_rpc /tank/share "newcomer" open fresh 10013
nfs4_rpc /tank/share "before-restart" reclaim-complete
nfs4_rpc /tank/share "newcomer" open fresh 0
pass "after a restart, new opens wait (NFS4ERR_GRACE) until the previous run's client says RECLAIM_COMPLETE"

daemon_stop
