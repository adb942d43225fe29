#!/usr/bin/env bash
# Permanent errors are named (`pool status -v`), kept across export/import and cleared
# by a scrub once the block no longer fails. A file in a subdirectory of a mirrored
# pool's filesystem has both copies of its first record destroyed while the pool is
# exported; reading it over NFS then fails with EIO, the daemon logs one line naming
# pool, dataset, object and offset, and `pool status -v` lists the file by path with
# the bytes lost. The entry survives an export and import and a scrub (the block is
# still bad: the scrub counts it); once the file is removed, the next scrub clears it.
# A volume block destroyed likewise: the iSCSI read fails with a medium error and the
# volume is named with the bytes lost.
# Also: cache devices are listed under `cache` (a scrub's rate and time to go are
# tested with fixed numbers in tests/unit/test_mgmt_status.c).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

nfs_daemon_start d1
dir="$T/disks"
sparse_files "$dir" 256M a b
run_ok "$CAIRN" pool create tank mirror "$dir/a" "$dir/b"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/fs
expect_share /tank/fs

url=$(nfs_url /tank/fs)
nfs_client "$url" mkdir dir
head -c 262144 /dev/urandom >"$T/bad.bin"
head -c 262144 /dev/urandom >"$T/good.bin"
nfs_client "$url" putfile dir/bad.bin "$T/bad.bin"
run_ok nfs-cp "$T/good.bin" "$(nfs_url /tank/fs/good.bin)"
run_ok "$CAIRN" pool status -v tank
expect_stdout '^errors: No known data errors$'
run_ok "$CAIRN" pool export tank

# Both mirror sides of bad.bin's first record: 4 KiB of it overwritten where it lies
# (random data is stored as written, so its first bytes are found in each leaf; an
# intent-log copy of the write, if any, is overwritten too and never read again).
python3 - "$T/bad.bin" "$dir/a" "$dir/b" <<'PY' || fail "record not found on both leaves"
import sys
want = open(sys.argv[1], "rb").read(4096)
for leaf in sys.argv[2:]:
    data = open(leaf, "rb").read()
    offs, off = [], data.find(want)
    while off >= 0:
        offs.append(off)
        off = data.find(want, off + 1)
    print(leaf, "copies at", offs, file=sys.stderr)
    if not offs:
        sys.exit(1)
    with open(leaf, "r+b") as f:
        for off in offs:
            f.seek(off)
            f.write(bytes(4096))
PY
run_ok "$CAIRN" pool import -d "$dir" tank
expect_share /tank/fs

# The read fails with EIO; the good file still reads.
mark=$(wc -l <"$T/d1.daemon.log")
nfs_client "$url" readerr dir/bad.bin
expect_stdout '^READ error at 0$'
nfs_rpc /tank/fs readstat dir/bad.bin
expect_stdout '^READ status 5$'   # NFS3ERR_IO
run_ok nfs-cat "$(nfs_url /tank/fs/good.bin)"
cmp -s "$LAST_STDOUT" "$T/good.bin" || fail "good.bin does not read back"
pass "a block with no good copy reads as EIO over NFS"

lines=$(tail -n +"$((mark + 1))" "$T/d1.daemon.log" | grep -c 'permanent error' || true)
[ "$lines" = 1 ] || fail "expected one log line for the bad block, got $lines: $(tail -n 20 "$T/d1.daemon.log")"
tail -n +"$((mark + 1))" "$T/d1.daemon.log" |
    grep -Eq 'pool tank: permanent error: dataset tank/fs object [0-9]+ offset 0: ' ||
    fail "log line lacks pool, dataset, object or offset: $(grep 'permanent error' "$T/d1.daemon.log")"
pass "the daemon logs the bad block once, with pool, dataset, object and offset"

named() {
    run_ok "$CAIRN" pool status -v tank
    expect_stdout '^errors: Permanent errors have been detected in the following files:$'
    expect_stdout '^        tank/fs:/dir/bad\.bin  \(bytes 0x0-0x1ffff\)$'
    if grep -q 'good.bin' "$LAST_STDOUT"; then fail "good.bin named: $(cat "$LAST_STDOUT")"; fi
    run_ok "$CAIRN" pool status tank
    expect_stdout "^errors: 1 data errors, use '-v' for a list$"
}
named
run_ok "$CAIRN" pool status -v tank
cat "$LAST_STDOUT"
pass "pool status -v names the file and the bytes lost"

run_ok "$CAIRN" pool export tank
run_ok "$CAIRN" pool import -d "$dir" tank
named
pass "the error log survives export and import"

run_ok "$CAIRN" pool scrub tank
wait_scrub tank
grep -q 'with 1 errors' "$LAST_STDOUT" || fail "scrub did not count the bad block: $(cat "$LAST_STDOUT")"
named
pass "a scrub that still finds the block bad keeps the entry"

expect_share /tank/fs
nfs_client "$url" rm dir/bad.bin
run_ok "$CAIRN" pool status -v tank
expect_stdout '^        tank/fs:'   # still listed until a scrub says otherwise
run_ok "$CAIRN" pool scrub tank
wait_scrub tank
grep -q 'with 0 errors' "$LAST_STDOUT" || fail "scrub after the removal: $(cat "$LAST_STDOUT")"
expect_stdout '^errors: No known data errors$'
run_ok "$CAIRN" pool export tank
run_ok "$CAIRN" pool import -d "$dir" tank
run_ok "$CAIRN" pool status -v tank
expect_stdout '^errors: No known data errors$'
pass "after the file is removed, a scrub clears the entry (and it stays cleared)"

# A volume's lost block: named as the volume's object with the bytes it held.
TGT=iqn.2026-11.org.cairn.test:errors
P=127.0.0.1:$(grep -a 'iscsi: listening on port' "$T/d1.daemon.log" | tail -n 1 |
    sed -E 's/.*listening on port ([0-9]+).*/\1/')
run_ok "$CAIRN" create -V 16M tank/vol
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" tank/vol
run_ok "$CAIRN_BIN/iscsi_client" write "$P" "$TGT" 5 64 1
run_ok "$CAIRN_BIN/iscsi_client" dump "$P" "$TGT" "$T/vol.img"
dd if="$T/vol.img" of="$T/vol4k" bs=4096 skip=16 count=1 status=none   # bytes 0x10000..
run_ok "$CAIRN" pool export tank
python3 - "$T/vol4k" "$dir/a" "$dir/b" <<'PY' || fail "volume block not found on both leaves"
import sys
want = open(sys.argv[1], "rb").read()
for leaf in sys.argv[2:]:
    data = open(leaf, "rb").read()
    offs, off = [], data.find(want)
    while off >= 0:
        offs.append(off)
        off = data.find(want, off + 1)
    if not offs:
        sys.exit(1)
    with open(leaf, "r+b") as f:
        for off in offs:
            f.seek(off)
            f.write(bytes(4096))
PY
run_ok "$CAIRN" pool import -d "$dir" tank
if "$CAIRN_BIN/iscsi_client" verify "$P" "$TGT" 5 64 >"$T/verify.out" 2>&1; then
    fail "the volume read back whole after its block was destroyed"
fi
grep -q 'read at 16 failed: .*0x1100' "$T/verify.out" ||   # MEDIUM ERROR, unrecovered read
    fail "volume read did not fail with a medium error at LBA 16: $(cat "$T/verify.out")"
run_ok "$CAIRN" pool status -v tank
line=$(grep -E '^        tank/vol:<0x[0-9a-f]+>  \(bytes 0x[0-9a-f]+-0x[0-9a-f]+\)$' "$LAST_STDOUT") ||
    fail "volume not named: $(cat "$LAST_STDOUT")"
python3 - "$line" <<'PY' || fail "named range does not hold byte 0x10000: $line"
import re, sys
a, b = (int(x, 16) for x in re.search(r"bytes (0x[0-9a-f]+)-(0x[0-9a-f]+)", sys.argv[1]).groups())
sys.exit(0 if a <= 0x10000 <= b else 1)
PY
pass "a volume's lost block is named with the bytes it held: $(sed "s/^ *//" <<<"$line")"
run_ok "$CAIRN" destroy -f tank/vol
run_ok "$CAIRN" pool destroy tank

# Cache devices: their own section, ONLINE; UNAVAIL when missing at import.
sparse_files "$dir" 64M c1 c2 d1
run_ok "$CAIRN" pool create cpool "$dir/d1" cache "$dir/c1" "$dir/c2"
run_ok "$CAIRN" pool status cpool
expect_stdout '^	cache$'
expect_stdout "^	  $dir/c1 +ONLINE +0 +0 +0$"
expect_stdout "^	  $dir/c2 +ONLINE +0 +0 +0$"
run_ok "$CAIRN" pool export cpool
rm -f "$dir/c2"
run_ok "$CAIRN" pool import -d "$dir" cpool
run_ok "$CAIRN" pool status cpool
expect_stdout "^	  $dir/c1 +ONLINE +0 +0 +0$"
expect_stdout "^	  $dir/c2 +UNAVAIL +0 +0 +0$"
cat "$LAST_STDOUT"
pass "pool status lists cache devices under cache"
run_ok "$CAIRN" pool destroy cpool

daemon_stop
