#!/usr/bin/env bash
# MOUNT of a directory below an export, as Linux nfsd allows: the handle of that
# directory (the one LOOKUP reaches), under the covering export's options; ".."
# is a name of a place, symbolic links are not followed; a file is NOTDIR, a
# missing name NOENT; .cairn/snapshot/NAME mounts the snapshot read-only.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

MNT3ERR_NOENT=2
MNT3ERR_ACCES=13
MNT3ERR_NOTDIR=20

# client_refused URL MODE ARGS: the nfs_client call fails with a refusal to write.
client_refused() {
    if "$NFSCLIENT" "$@" >"$LAST_STDOUT" 2>"$LAST_STDERR"; then fail "nfs_client $* succeeded"; fi
    grep -Eq 'NFS3ERR_(ROFS|ACCES)|EROFS|EACCES|-13|-30|Permission denied|Read-only' "$LAST_STDERR" ||
        fail "nfs_client $*: not a refusal: $(cat "$LAST_STDERR")"
}

sparse_files "$T/dev" 2G a
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
expect_share /tank/share
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/other
expect_share /tank/other
nfs_client "$(nfs_url /tank/share)" mkdir dir
nfs_client "$(nfs_url /tank/share)" mkdir dir/sub
nfs_client "$(nfs_url /tank/share)" put dir/sub/f.txt "deep"
nfs_client "$(nfs_url /tank/share)" put ro-probe "probe
"
nfs_client "$(nfs_url /tank/other)" put o.txt "other"

# ---- a subdirectory mounts, with its own handle ----
nfs_rpc /tank/share mnt /tank/share/dir/sub 0
nfs_rpc /tank/share mnt /tank/share/dir/sub/ 0
nfs_rpc /tank/share mnt //tank/share/./dir//sub 0
nfs_client "$(nfs_url /tank/share/dir/sub)" get f.txt
[ "$(cat "$LAST_STDOUT")" = deep ] || fail "file read through a subdirectory mount: $(cat "$LAST_STDOUT")"
nfs_client "$(nfs_url /tank/share/dir)" put sub/g.txt "written"
nfs_client "$(nfs_url /tank/share)" get dir/sub/g.txt
[ "$(cat "$LAST_STDOUT")" = written ] || fail "write through a subdirectory mount: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" share list -H
pass "MOUNT of a directory below an export: its handle, reads and writes"

# ---- errors ----
nfs_rpc /tank/share mnt /tank/share/dir/nosuch "$MNT3ERR_NOENT"
nfs_rpc /tank/share mnt /tank/share/dir/sub/f.txt "$MNT3ERR_NOTDIR"
nfs_rpc /tank/share mnt /tank/share/dir/sub/f.txt/x "$MNT3ERR_NOTDIR"
nfs_rpc /tank/share mnt /tank/shar "$MNT3ERR_NOENT"
nfs_rpc /tank/share mnt /tank/sharex/dir "$MNT3ERR_NOENT"
nfs_rpc /tank/share mnt tank/share "$MNT3ERR_NOENT"
pass "MNT of a missing name: NOENT; of a file or through one: NOTDIR"

# ---- ".." is resolved as a name of a place: it reaches another export only as
# that export, under its rules ----
nfs_rpc /tank/share mnt /tank/share/dir/.. 0
nfs_rpc /tank/share mnt /tank/share/../other 0
nfs_client "$(nfs_url /tank/share/../other)" get o.txt
[ "$(cat "$LAST_STDOUT")" = other ] || fail "via ..: $(cat "$LAST_STDOUT")"
nfs_rpc /tank/share mnt /tank/share/../../../tank/share/dir 0
nfs_rpc /tank/share mnt /tank/share/../nothere "$MNT3ERR_NOENT"
run_ok "$CAIRN" set sharenfs=rw=@10.0.0.0/8 tank/other
nfs_rpc /tank/share mnt /tank/share/../other "$MNT3ERR_ACCES"
run_ok "$CAIRN" set sharenfs=no_root_squash tank/other
pass "\"..\" never escapes: the export the path lands in decides"

# ---- symbolic links are not followed ----
nfs_client "$(nfs_url /tank/share)" symlink / dir/up
nfs_client "$(nfs_url /tank/share)" symlink sub dir/down
nfs_rpc /tank/share mnt /tank/share/dir/up "$MNT3ERR_NOTDIR"
nfs_rpc /tank/share mnt /tank/share/dir/up/tank "$MNT3ERR_NOTDIR"
nfs_rpc /tank/share mnt /tank/share/dir/down "$MNT3ERR_NOTDIR"
pass "a symbolic link on the path is not followed: NOTDIR"

# ---- snapshots below a filesystem export, read-only ----
run_ok "$CAIRN" snapshot tank/share@s1
nfs_rpc /tank/share mnt /tank/share/.cairn/snapshot/s1 0
nfs_rpc /tank/share mnt /tank/share/.cairn/snapshot/s1/dir/sub 0
nfs_rpc /tank/share mnt /tank/share/.cairn/snapshot/nosuch "$MNT3ERR_NOENT"
nfs_rpc /tank/share mnt /tank/share/dir/.cairn/snapshot/s1 "$MNT3ERR_NOENT"
nfs_client "$(nfs_url /tank/share/.cairn/snapshot/s1)" get ro-probe
[ "$(cat "$LAST_STDOUT")" = probe ] || fail "reading a mounted snapshot: $(cat "$LAST_STDOUT")"
client_refused "$(nfs_url /tank/share/.cairn/snapshot/s1)" mkdir newdir
client_refused "$(nfs_url /tank/share/.cairn/snapshot/s1/dir)" put sub/new.txt "x"
client_refused "$(nfs_url /tank/share/.cairn/snapshot/s1)" rm ro-probe
nfs_client "$(nfs_url /tank/share)" get ro-probe
nfs_client "$(nfs_url /tank/share/.cairn/snapshot/s1/dir/sub)" get f.txt
[ "$(cat "$LAST_STDOUT")" = deep ] || fail "reading a snapshot's subdirectory: $(cat "$LAST_STDOUT")"
pass ".cairn/snapshot/NAME mounts the snapshot read-only"

# ---- `cairn share list` counts mounts below an export as its clients ----
run_ok "$CAIRN" create -o sharenfs=on tank/third
run_ok "$CAIRN" snapshot tank/third@s
nfs_rpc /tank/third mnt /tank/third/../third/.cairn/snapshot/s 0
run_ok "$CAIRN" share list -H
grep -q '^tank/third	/tank/third	on	3,4	1$' "$LAST_STDOUT" ||
    fail "share list does not count the snapshot mount: $(cat "$LAST_STDOUT")"
pass "a mount below an export counts as its client"

# ---- the export's client list applies to its subdirectories ----
run_ok "$CAIRN" set sharenfs=rw=@10.0.0.0/8 tank/share
nfs_rpc /tank/share mnt /tank/share/dir/sub "$MNT3ERR_ACCES"
nfs_rpc /tank/share mnt /tank/share/.cairn/snapshot/s1 "$MNT3ERR_ACCES"
nfs_client "$(nfs_url /tank/share/dir)" denied
pass "a client the export excludes cannot mount below it either"
