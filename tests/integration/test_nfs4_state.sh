#!/usr/bin/env bash
# NFSv4 state against files that go away and clients that go silent, over the wire
# with the raw NFSv4.1 client (tests/integration/nfs4_rpc.py), on a daemon whose
# cairnd.conf sets nfs_lease_time:
#   - a file removed while open stays readable and writable by its opener; a new file
#     under its name inherits none of its locks; a file replaced by RENAME stays
#     readable by its opener (pynfs RNM21); after the CLOSEs nothing is left behind
#     (`cairn check` of the exported pool is clean);
#   - the lease is the configured one (lease_time attribute), and a silent client's
#     lock yields to another client's LOCK once its lease is over; the silent
#     client's session is then gone; a client ID never confirmed is gone after a lease;
#   - NFSv4.0 state and attribute rules (nfs4_rpc.py v40-rules, from pynfs failures).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

sparse_files "$T/dev" 4G a
printf 'nfs_lease_time = 5\n' >"$T/lease.conf"
nfs_daemon_start d1 --config "$T/lease.conf"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
expect_share /tank/share

nfs4_rpc /tank/share "rm-$$" removed-open victim
pass "removed and renamed-over files stay usable by their openers; a new file under the name locks freely"

nfs4_rpc /tank/share "cour-$$" courtesy contended 5
pass "lease_time is cairnd.conf's 5 s; a silent client's lock yields to a conflicting LOCK once its lease is over"

nfs4_rpc /tank/share "v40-$$" v40-rules rules40
pass "NFSv4.0 rules: OPEN create size, UNCHECKED4 over a file, bypass/anonymous/zero-length/foreign-user WRITEs, special stateids, lock-owner clientid, OPEN_DOWNGRADE and own deny, write-only attributes, ACCESS bits, READLINK/OPEN of non-files, CLID_INUSE, EXPIRED after a client restart"

nfs4_rpc /tank/share "unconf-$$" unconfirmed-expiry 5
pass "a client ID left unconfirmed for a lease is gone (STALE_CLIENTID)"

daemon_stop
check_clean tank "$T/dev"
pass "the pool checks clean after the removed files were closed"
