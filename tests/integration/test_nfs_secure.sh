#!/usr/bin/env bash
# The `secure` export option: only clients calling from a privileged port (< 1024)
# are served, as Linux nfsd answers (MOUNT: MNT3ERR_ACCES; NFS calls: NFS3ERR_PERM,
# NFS4ERR_PERM); `insecure`, the default, serves any port.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

sparse_files "$T/dev" 2G a
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/fs
expect_share /tank/fs
nfs_rpc /tank/fs mnt /tank/fs 0

run_ok "$CAIRN" set sharenfs=no_root_squash,secure tank/fs
run_ok "$CAIRN" share list -H
expect_stdout '	no_root_squash,secure	'
nfs_rpc /tank/fs secure
pass "secure: a high source port is refused (ACCES at MOUNT, PERM for NFSv3/v4), a privileged one served"

run_ok "$CAIRN" set sharenfs=no_root_squash,insecure tank/fs
nfs_rpc /tank/fs mnt /tank/fs 0
run_ok "$CAIRN" set sharenfs=no_root_squash tank/fs
nfs_rpc /tank/fs mnt /tank/fs 0
pass "insecure (the default): any source port"

for bad in 'secure=1' 'insecure=yes'; do
    run_fail "$CAIRN" set "sharenfs=$bad" tank/fs
    expect_stderr 'sharenfs'
done
pass "secure and insecure take no value"
