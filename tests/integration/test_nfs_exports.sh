#!/usr/bin/env bash
# Exports follow the datasets: sharenfs and mountpoint changes, create/destroy/rename,
# inherit, pool export/import; options decide who may mount (a client list without
# 127.0.0.1 is refused) and who may still use a handle it has (NFS3ERR_ACCES), ro
# exports answer EROFS, vers=4 shares refuse NFSv3; `cairn share list` shows it all;
# bad sharenfs values are refused with one line.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

sparse_files "$T/dev" 4G a
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" share list
[ "$(wc -l <"$LAST_STDOUT")" -eq 1 ] || fail "share list of nothing: $(cat "$LAST_STDOUT")"
expect_stdout '^DATASET +PATH +OPTIONS +VERSIONS +CLIENTS$'

# ---- bad values are refused, and change nothing ----
run_ok "$CAIRN" create tank/fs
for bad in 'rw=' 'bogus' 'anonuid=x' 'sec=krb5' 'vers=2' 'rw=@10.0.0.0/33' 'root_squash,all_squash' 'rw,,ro'; do
    run_fail "$CAIRN" set "sharenfs=$bad" tank/fs
    expect_stderr 'sharenfs'
done
run_fail "$CAIRN" create -o sharenfs=nonsense tank/fs2
expect_stderr 'sharenfs'
expect_no_share /tank/fs
pass "bad sharenfs values refused"

# ---- a filesystem that cannot be shared is not created ----
run_ok "$CAIRN" create -o sharenfs=on tank/taken
expect_share /tank/taken
run_fail "$CAIRN" create -o sharenfs=on -o mountpoint=/tank/taken tank/dup
expect_stderr "^cairn: cannot create 'tank/dup': cannot share it over NFS: .*/tank/taken.*tank/taken"
run_fail "$CAIRN" list tank/dup
run_ok "$CAIRN" snapshot tank/taken@s
run_fail "$CAIRN" clone -o sharenfs=on -o mountpoint=/tank/taken tank/taken@s tank/dupclone
expect_stderr "^cairn: cannot create 'tank/dupclone': cannot share it over NFS"
run_fail "$CAIRN" list tank/dupclone
run_ok "$CAIRN" share list -H
expect_stdout '^tank/taken	/tank/taken	'
# A set that would make a share impossible is refused and taken back: a shared
# filesystem moved onto a taken path, an unshared one at a taken path shared.
run_ok "$CAIRN" create -o sharenfs=on tank/other
run_fail "$CAIRN" set mountpoint=/tank/taken tank/other
expect_stderr "^cairn: cannot set property for 'tank/other': cannot share it over NFS"
expect_prop mountpoint tank/other /tank/other
expect_share /tank/other
run_ok "$CAIRN" set sharenfs=off tank/other
run_ok "$CAIRN" set mountpoint=/tank/taken tank/other
run_fail "$CAIRN" set sharenfs=on tank/other
expect_stderr "^cairn: cannot set property for 'tank/other': cannot share it over NFS"
expect_prop sharenfs tank/other off
run_ok "$CAIRN" share list -H
expect_stdout '^tank/taken	/tank/taken	'
run_ok "$CAIRN" destroy tank/other
run_ok "$CAIRN" destroy -r tank/taken
pass "create/clone/set with sharenfs of what cannot be shared: one-line error, nothing left"

# ---- set, options change in place, mountpoint moves, inherit, rename, destroy ----
run_ok "$CAIRN" set sharenfs=no_root_squash tank/fs
expect_share /tank/fs
nfs_client "$(nfs_url /tank/fs)" put keep.txt "kept"
nfs_rpc /tank/fs savefh keep.txt
FH=$(cat "$LAST_STDOUT")
# A client keeps its handles after MOUNT: once the export lists only others, every
# request with them is refused, not just the next MOUNT.
run_ok "$CAIRN" set sharenfs=rw=@10.0.0.0/8,no_root_squash tank/fs
nfs_rpc /tank/fs usefh "$FH" 13
pass "a handle presented by a client the export no longer allows: NFS3ERR_ACCES"
run_ok "$CAIRN" set sharenfs=no_root_squash,anonuid=1000 tank/fs
run_ok "$CAIRN" share list -H
expect_stdout '^tank/fs	/tank/fs	no_root_squash,anonuid=1000	3,4	'
nfs_rpc /tank/fs usefh "$FH" 0
pass "options change in place: handles stay valid"

run_ok "$CAIRN" set mountpoint=/exports/fs tank/fs
expect_share /exports/fs
expect_no_share /tank/fs
nfs_client "$(nfs_url /exports/fs)" get keep.txt
[ "$(cat "$LAST_STDOUT")" = kept ] || fail "after mountpoint change: $(cat "$LAST_STDOUT")"
nfs_rpc /exports/fs usefh "$FH" 0
run_ok "$CAIRN" inherit mountpoint tank/fs
expect_share /tank/fs

run_ok "$CAIRN" snapshot tank/fs@snap1
run_ok "$CAIRN" destroy tank/fs@snap1
expect_share /tank/fs
run_ok "$CAIRN" snapshot tank/fs@snap2
nfs_client "$(nfs_url /tank/fs)" get .cairn/snapshot/snap2/keep.txt
[ "$(cat "$LAST_STDOUT")" = kept ] || fail "reading a snapshot over NFS: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" destroy tank/fs@snap2
expect_share /tank/fs
nfs_rpc /tank/fs usefh "$FH" 0
pass "snapshots readable under .cairn/snapshot; destroying one keeps the share"

run_ok "$CAIRN" set sharenfs=no_root_squash tank
expect_share /tank
run_ok "$CAIRN" create tank/kid
expect_share /tank/kid
run_ok "$CAIRN" set sharenfs=off tank/kid
expect_no_share /tank/kid
run_ok "$CAIRN" inherit sharenfs tank/kid
expect_share /tank/kid
run_ok "$CAIRN" rename tank/kid tank/kid2
expect_share /tank/kid2
expect_no_share /tank/kid
run_ok "$CAIRN" snapshot tank/kid2@s1
run_ok "$CAIRN" rollback tank/kid2@s1
expect_share /tank/kid2
run_ok "$CAIRN" destroy -r tank/kid2
expect_no_share /tank/kid2
run_ok "$CAIRN" share list --json
expect_stdout '"shares"'
pass "exports follow set, inherit, create, rename, rollback, destroy"

# ---- who may mount ----
run_ok "$CAIRN" create -o sharenfs=rw=@10.0.0.0/8:@fd00::/64,no_root_squash tank/closed
expect_share /tank/closed
nfs_client "$(nfs_url /tank/closed)" denied
pass "a client outside the lists is refused (MNT3ERR_ACCES)"
run_ok "$CAIRN" set sharenfs=no_root_squash tank/closed
nfs_client "$(nfs_url /tank/closed)" put ro-probe "probe
"
run_ok "$CAIRN" set sharenfs=ro,no_root_squash tank/closed
nfs_client "$(nfs_url /tank/closed)" rofs
nfs_rpc /tank/closed rofs ro-probe
run_ok "$CAIRN" set sharenfs=rw=@10.0.0.0/8,ro=127.0.0.1,no_root_squash tank/closed
nfs_client "$(nfs_url /tank/closed)" rofs
nfs_rpc /tank/closed rofs ro-probe
run_ok "$CAIRN" set sharenfs=no_root_squash tank/closed
run_ok "$CAIRN" set readonly=on tank/closed
nfs_client "$(nfs_url /tank/closed)" rofs
nfs_rpc /tank/closed rofs ro-probe
run_ok "$CAIRN" set readonly=off tank/closed
pass "ro lists, ro exports and readonly=on answer EROFS"
run_ok "$CAIRN" set sharenfs=vers=4,no_root_squash tank/closed
nfs_client "$(nfs_url /tank/closed)" denied
run_ok "$CAIRN" share list -H
expect_stdout '^tank/closed	/tank/closed	vers=4,no_root_squash	4	'
pass "vers=4 refuses NFSv3"

# ---- pool export and import ----
run_ok "$CAIRN" pool export tank
expect_no_share /tank/fs
run_ok "$CAIRN" pool import -d "$T/dev" tank
expect_share /tank/fs
nfs_rpc /tank/fs usefh "$FH" 0
pass "pool export/import unexports and exports again"
