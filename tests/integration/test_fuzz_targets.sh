#!/usr/bin/env bash
# The libFuzzer targets in tests/fuzz (the NFS RPC/XDR decoder, the iSCSI PDU parser)
# build and survive a short fixed run. The suite is built with gcc, which cannot build
# them, so without this a target could stop compiling, or find a bug in its first
# inputs, unnoticed. They are built with clang, ASan+UBSan and libFuzzer (CAIRN_FUZZ
# instruments the NFS library) in a build directory of their own, $CAIRN_BIN/fuzz, and
# each runs a fixed number of inputs from a fixed seed: a few seconds once built.
# Exits 77 (skip) only when clang is not installed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

if ! command -v clang >/dev/null; then
    echo "clang is not installed (tools/install-deps installs it): skipped"
    exit 77
fi
B="$CAIRN_BIN/fuzz"
CC=clang cmake -S "$CAIRN_SRC" -B "$B" -DCMAKE_BUILD_TYPE=Debug -DCAIRN_SANITIZE=ON \
    -DCAIRN_FUZZ=ON >"$T/configure.log" 2>&1 || fail "configure with clang: $(tail -n 20 "$T/configure.log")"
cmake --build "$B" -j"$(nproc)" --target fuzz_nfs_rpc fuzz_iscsi_pdu >"$T/build.log" 2>&1 ||
    fail "building the fuzz targets with clang: $(grep -E -A5 'error' "$T/build.log" | head -n 40)"
pass "fuzz_nfs_rpc and fuzz_iscsi_pdu build with clang, libFuzzer, ASan and UBSan"

# fuzz TARGET RUNS ARGS...: RUNS inputs from seed 1; a crash, sanitizer report or leak
# fails (the reproducer is written under $T).
fuzz() {
    local target=$1 runs=$2; shift 2
    (cd "$T" && TMPDIR="$T" "$B/$target" -seed=1 -runs="$runs" -artifact_prefix="$T/" "$@") \
        >"$T/$target.log" 2>&1 ||
        fail "$target: $(grep -E -A25 'ERROR|runtime error|deadly signal' "$T/$target.log" | head -n 40)"
    grep -q "Done $runs runs" "$T/$target.log" || fail "$target did not finish its runs: $(tail -n 5 "$T/$target.log")"
}
fuzz fuzz_iscsi_pdu 200000 -max_len=8192
pass "fuzz_iscsi_pdu: 200000 inputs"
fuzz fuzz_nfs_rpc 20000 -max_len=4096
pass "fuzz_nfs_rpc: 20000 inputs"
