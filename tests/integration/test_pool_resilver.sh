#!/usr/bin/env bash
# Offline, online and replace on a live pool, with NFS writes in between, for a
# 2-way mirror and a raidz2 (files as disks).
#  - offline: the leaf shows OFFLINE, the pool DEGRADED with status/action advice;
#    offlining the last good copy is refused with one line and changes nothing;
#    offline (without -t) survives export and import; offline -t ends at a restart,
#    after which the leaf resilvers by itself.
#  - online: the resilver writes only what the leaf missed (bytes resilvered far
#    below the data the pool holds), then every file reads back, and a scrub
#    repairs nothing (so the resilvered leaf holds every copy/column it should).
#  - replace: a leaf file swapped for a blank one (same path, even blanked in place),
#    for a new file, or lost while the pool was exported (imported DEGRADED);
#    on raidz2 two leaves at once; the tree shows replacing-N meanwhile; a healthy
#    disk replaced by another keeps serving (pool ONLINE) and is freed after.
#  - kill -9 in the middle of a resilver (slowed with CAIRN_RESILVER_DELAY_US):
#    after restart it goes on and finishes, and the data verifies.
# Each pool ends with `cairn check` clean after export.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

nfs_daemon_start d1

# offline_online NAME TYPE NLEAVES NOFF: NOFF leaves offline while more is written.
offline_online() {
    local pool=$1 type=$2 n=$3 noff=$4 dir="$T/$1" paths=() i
    for i in $(seq 1 "$n"); do paths+=("$dir/l$i"); done
    sparse_files "$dir" 256M $(for i in $(seq 1 "$n"); do echo "l$i"; done)
    run_ok "$CAIRN" pool create "$pool" $type "${paths[@]}"
    run_ok "$CAIRN" create -o sharenfs=no_root_squash "$pool/fs"
    pool_put "$pool" a 16; pool_put "$pool" b 16; pool_put "$pool" c 16
    # A scrub starts with a sync: the files' txgs are durable before the offline
    # (blocks of a txg not yet synced at offline time count as missed).
    run_ok "$CAIRN" pool scrub "$pool"
    run_ok "$CAIRN" pool wait -t scrub "$pool"

    local off=("${paths[@]:1:$noff}")
    for i in "${off[@]}"; do run_ok "$CAIRN" pool offline "$pool" "$i"; done
    # One more would leave some block without a good copy.
    run_fail "$CAIRN" pool offline "$pool" "${paths[0]}"
    expect_stderr "no valid replicas"
    run_ok "$CAIRN" pool status "$pool"
    expect_stdout "state: DEGRADED"
    expect_stdout "status: One or more devices has been taken offline"
    [ "$(leaf_row "${paths[0]}")" = "ONLINE 0 0 0" ] || fail "$pool: refused offline changed ${paths[0]}"
    for i in "${off[@]}"; do
        [ "$(leaf_row "$i")" = "OFFLINE 0 0 0" ] || fail "$pool: $i: $(leaf_row "$i")"
    done
    pass "$pool: ${#off[@]} leaves offline, the pool DEGRADED, the last copy kept"
    local sums; sums=$(cksum "${off[@]}")

    pool_put "$pool" d 4
    # Offline is kept in the labels: export and import keep it.
    run_ok "$CAIRN" pool export "$pool"
    run_ok "$CAIRN" pool import -d "$dir" "$pool"
    run_ok "$CAIRN" pool status "$pool"
    for i in "${off[@]}"; do
        [ "$(leaf_row "$i")" = "OFFLINE 0 0 0" ] || fail "$pool: after import $i: $(leaf_row "$i")"
    done
    pool_put "$pool" e 2
    pass "$pool: offline survives export and import"

    # Offline means no I/O at all: not data, not labels, not uberblocks.
    [ "$(cksum "${off[@]}")" = "$sums" ] || fail "$pool: an offline leaf was written"
    for i in "${off[@]}"; do run_ok "$CAIRN" pool online "$pool" "$i"; done
    local r; r=$(resilvered "$pool")
    echo "$pool: $(grep 'scan:' "$LAST_STDOUT")"
    # 54 MiB of files in the pool, 6 MiB of them written while the leaves were out.
    [ "$r" -gt 0 ] && [ "$r" -lt $((24 << 20)) ] \
        || fail "$pool: resilvered $r bytes: not only the missed txgs"
    run_ok "$CAIRN" pool status "$pool"
    expect_stdout "state: ONLINE"
    pool_verify_all "$pool"
    scrub_clean "$pool"
    pass "$pool: online resilvered $r bytes (only what was missed); data and scrub clean"
    run_ok "$CAIRN" pool export "$pool"
    check_clean "$pool" "$dir"
    run_ok "$CAIRN" pool import -d "$dir" "$pool"
}

offline_online mtank mirror 2 1
offline_online rtank raidz2 4 2

# ---- bad input: one line, nothing changed ----
run_ok "$CAIRN" pool status mtank
cp "$LAST_STDOUT" "$T/status.before"
run_fail "$CAIRN" pool offline mtank "$T/mtank/nosuch"
expect_stderr "no such device"
truncate -s 32M "$T/small"
run_fail "$CAIRN" pool replace mtank "$T/mtank/l2" "$T/small"
expect_stderr "too small"
run_fail "$CAIRN" pool replace mtank "$T/rtank/l1" "$T/small"
expect_stderr "no such device"
run_fail "$CAIRN" pool online -e mtank "$T/mtank/nosuch"
expect_stderr "no such device"
run_ok "$CAIRN" pool status mtank
diff <(grep -v 'scan:' "$T/status.before") <(grep -v 'scan:' "$LAST_STDOUT") >/dev/null \
    || fail "refused commands changed the pool: $(cat "$LAST_STDOUT")"
pass "mtank: unknown device, too small a replacement, online -e of an unknown device refused; nothing changed"

# ---- replace: the mirror's second disk offline, then swapped for a blank file at the
# same path ----
run_ok "$CAIRN" pool offline mtank "$T/mtank/l2"
rm -f "$T/mtank/l2"
truncate -s 256M "$T/mtank/l2"
pool_put mtank f 4
run_ok "$CAIRN" pool replace mtank "$T/mtank/l2"
r=$(resilvered mtank)
[ "$r" -gt $((50 << 20)) ] || fail "mtank: a blank disk got only $r bytes"
run_ok "$CAIRN" pool status mtank
expect_stdout "state: ONLINE"
if grep -q replacing "$LAST_STDOUT"; then fail "mtank: replacing vdev left: $(cat "$LAST_STDOUT")"; fi
pool_verify_all mtank
scrub_clean mtank
pass "mtank: a blank disk in place of l2 was resilvered ($r bytes); data and scrub clean"

# ---- replace two raidz2 leaves: one blanked in place (the same file, which the
# daemon has open), one by another file ----
truncate -s 0 "$T/rtank/l3"
truncate -s 256M "$T/rtank/l3" "$T/rtank/n4"
run_ok "$CAIRN" pool replace rtank "$T/rtank/l3"
run_ok "$CAIRN" pool replace rtank "$T/rtank/l4" "$T/rtank/n4"
run_ok "$CAIRN" pool status rtank
pool_put rtank g 4
r=$(resilvered rtank)
run_ok "$CAIRN" pool status rtank
expect_stdout "state: ONLINE"
grep -q "$T/rtank/n4" "$LAST_STDOUT" || fail "rtank: n4 not in the pool: $(cat "$LAST_STDOUT")"
if grep -q "$T/rtank/l4 " "$LAST_STDOUT"; then fail "rtank: l4 still in the pool"; fi
pool_verify_all rtank
scrub_clean rtank
pass "rtank: two raidz2 leaves replaced ($r bytes resilvered); data and scrub clean"

# ---- a disk lost while the pool was exported: imported DEGRADED, then replaced by a
# blank one at the same path ----
run_ok "$CAIRN" pool export rtank
rm -f "$T/rtank/n4"
run_ok "$CAIRN" pool import -d "$T/rtank" rtank
run_ok "$CAIRN" pool status rtank
expect_stdout "state: DEGRADED"
expect_stdout "action: Attach the missing device: it is taken back by itself"
[ "$(leaf_row "$T/rtank/n4" | cut -d' ' -f1)" = UNAVAIL ] || fail "rtank: n4: $(leaf_row "$T/rtank/n4")"
pool_verify_all rtank
truncate -s 256M "$T/rtank/n4"
run_ok "$CAIRN" pool replace rtank "$T/rtank/n4"
r=$(resilvered rtank)
run_ok "$CAIRN" pool status rtank
expect_stdout "state: ONLINE"
pool_verify_all rtank
scrub_clean rtank
pass "rtank: a disk missing at import replaced in place ($r bytes resilvered)"

# ---- offline -t lasts until the daemon restarts; then the leaf resilvers by itself ----
run_ok "$CAIRN" pool offline -t mtank "$T/mtank/l2"
pool_put mtank i 2
run_ok "$CAIRN" pool status mtank
[ "$(leaf_row "$T/mtank/l2")" = "OFFLINE 0 0 0" ] || fail "mtank: l2: $(leaf_row "$T/mtank/l2")"

# ---- kill -9 in the middle of a resilver ----
daemon_stop
CAIRN_RESILVER_DELAY_US=20000 nfs_daemon_start d1
r=$(resilvered mtank)
[ "$(leaf_row "$T/mtank/l2")" = "ONLINE 0 0 0" ] || fail "mtank: after restart l2: $(leaf_row "$T/mtank/l2")"
[ "$r" -gt 0 ] && [ "$r" -lt $((16 << 20)) ] || fail "mtank: l2 back after offline -t: resilvered $r"
pass "mtank: offline -t ended with the restart; l2 got only what it missed ($r bytes)"
rm -f "$T/mtank/l1"
truncate -s 256M "$T/mtank/l1"
run_ok "$CAIRN" pool replace mtank "$T/mtank/l1"
run_ok "$CAIRN" pool status mtank
expect_stdout "scan: resilver in progress since"
expect_stdout "replacing-0"
expect_stdout "status: One or more devices is currently being resilvered"
echo "mtank: $(grep -A2 'scan:' "$LAST_STDOUT" | tr '\n\t' '  ')"
# The pool serves reads and writes meanwhile (the new file goes to the new disk too:
# the scrub at the end would repair it otherwise).
pool_put mtank h 4
pool_verify_all mtank
run_ok "$CAIRN" pool status mtank
expect_stdout "scan: resilver in progress since"
since=$(grep -o 'resilver in progress since .*' "$LAST_STDOUT")
pass "mtank: reads and writes served during the resilver"
daemon_kill9
CAIRN_RESILVER_DELAY_US=20000 nfs_daemon_start d1
run_ok "$CAIRN" pool status mtank
grep -qF "$since" "$LAST_STDOUT" || fail "mtank: after restart, not '$since': $(grep scan: "$LAST_STDOUT")"
r=$(resilvered mtank)
run_ok "$CAIRN" pool status mtank
expect_stdout "state: ONLINE"
pool_verify_all mtank
scrub_clean mtank
pass "mtank: resilver killed with -9 resumed after restart and finished ($r bytes)"

# ---- replace a healthy disk by another: the old one serves until the new one is whole ----
truncate -s 256M "$T/mtank/m2"
run_ok "$CAIRN" pool replace mtank "$T/mtank/l2" "$T/mtank/m2"
run_ok "$CAIRN" pool status mtank
expect_stdout "state: ONLINE"
expect_stdout "replacing-1"
[ "$(leaf_row "$T/mtank/l2")" = "ONLINE 0 0 0" ] || fail "mtank: old l2: $(leaf_row "$T/mtank/l2")"
pool_put mtank j 2
r=$(resilvered mtank)
run_ok "$CAIRN" pool status mtank
if grep -q "$T/mtank/l2 " "$LAST_STDOUT"; then fail "mtank: l2 still in the pool"; fi
[ "$(leaf_row "$T/mtank/m2")" = "ONLINE 0 0 0" ] || fail "mtank: m2: $(leaf_row "$T/mtank/m2")"
pool_verify_all mtank
scrub_clean mtank
pass "mtank: healthy l2 replaced by m2 while serving ($r bytes resilvered)"

for p in mtank rtank; do
    run_ok "$CAIRN" pool export "$p"
    check_clean "$p" "$T/$p"
done
pass "both pools check clean"
# The replaced disk's labels were cleared: a new pool takes it without -f.
run_ok "$CAIRN" pool create other "$T/mtank/l2"
run_ok "$CAIRN" pool destroy other
pass "the replaced disk is free for reuse"
