#!/usr/bin/env bash
# Imports from a directory whose other devices are held by other pools, as the heads
# of an active/active pair do (docs/ha.md, "Takeover time"): a busy device is opened
# without its lock only to read its label, and skipped when the label names another
# pool. Checked here by what must still hold:
#   - head b imports pool q from the directory while head a holds pool p there, and
#     serves it (a dataset is listed);
#   - b cannot import p, which a holds: refused as a device in use, with -f too;
#   - a, holding p, imports q back after b exported it (its own busy device, p.img, is
#     skipped the same way), and p stays healthy on a all along;
#   - without a name (the list of importable pools) the free pool r is found.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

sparse_files "$T/dev" 1G p.img q.img r.img
daemon_start a
SOCK_A=$CAIRN_SOCKET
run_ok "$CAIRN" pool create p "$T/dev/p.img"
run_ok "$CAIRN" pool create q "$T/dev/q.img"
run_ok "$CAIRN" create q/fs
run_ok "$CAIRN" pool export q
daemon_start b
SOCK_B=$CAIRN_SOCKET

CAIRN_SOCKET=$SOCK_B run_ok "$CAIRN" pool import -d "$T/dev" q
CAIRN_SOCKET=$SOCK_B run_ok "$CAIRN" list -H -o name
grep -qx "q/fs" "$LAST_STDOUT" || fail "q's dataset on b: $(cat "$LAST_STDOUT")"
pass "b imports q from the directory where a holds p"

for opt in "" -f; do
    # shellcheck disable=SC2086 # no option or one
    CAIRN_SOCKET=$SOCK_B run_fail "$CAIRN" pool import -d "$T/dev" $opt p
    grep -q "in use by another process" "$LAST_STDERR" ||
        fail "b's import ${opt:+-f }of p, which a holds: $(cat "$LAST_STDERR")"
done
pass "b cannot import p while a holds it, -f or not"

CAIRN_SOCKET=$SOCK_B run_ok "$CAIRN" pool export q
CAIRN_SOCKET=$SOCK_A run_ok "$CAIRN" pool import -d "$T/dev" q
CAIRN_SOCKET=$SOCK_A run_ok "$CAIRN" pool list -H
grep -q "^p[[:space:]].*ONLINE" "$LAST_STDOUT" && grep -q "^q[[:space:]].*ONLINE" "$LAST_STDOUT" ||
    fail "a's pools: $(cat "$LAST_STDOUT")"
pass "a, holding p, imports q back; both ONLINE"

CAIRN_SOCKET=$SOCK_B run_ok "$CAIRN" pool create r "$T/dev/r.img"
CAIRN_SOCKET=$SOCK_B run_ok "$CAIRN" pool export r
CAIRN_SOCKET=$SOCK_B run_ok "$CAIRN" pool import -d "$T/dev"
grep -qw "r" "$LAST_STDOUT" || fail "b's list of importable pools: $(cat "$LAST_STDOUT")"
CAIRN_SOCKET=$SOCK_B run_ok "$CAIRN" pool import -d "$T/dev" r
pass "the list of importable pools (no name: every busy device gets its wait) has r; b imports it"

CAIRN_SOCKET=$SOCK_A run_ok "$CAIRN" pool export p
CAIRN_SOCKET=$SOCK_A run_ok "$CAIRN" pool export q
CAIRN_SOCKET=$SOCK_B run_ok "$CAIRN" pool export r
