#!/usr/bin/env bash
# Disk service and the remaining verbs through the REST API: offline/online,
# attach/detach, replace, spares added and removed, a pool property set, a
# dataset property inherited, events and history read back, iSCSI CHAP set and a
# LUN removed. Each change is checked with the CLI (one implementation behind
# both), each refusal is the CLI's one-line message, and a read-only token gets
# 403 for every one of them with nothing changed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"

command -v curl >/dev/null || { echo "skip: curl is not installed"; exit 77; }
HPORT=$(cairn_random_port)
U="https://127.0.0.1:$HPORT"
TGT=iqn.2026-12.org.cairn.test:disks
sparse_files "$T/dev" 512M a b c d e
# state DEV: the device's state in `pool status tank`.
state() {
    "$CAIRN" pool status tank >"$LAST_STDOUT"
    leaf_row "$1" | cut -d' ' -f1
}

daemon_start d1 --http-listen "127.0.0.1:$HPORT"
run_ok "$CAIRN" pool create tank mirror "$T/dev/a" "$T/dev/b"
run_ok "$CAIRN" create -o compression=lz4 tank/fs
run_ok "$CAIRN" create -o compression=gzip tank/fs/child
run_ok "$CAIRN" create -V 64M tank/vol
run_ok "$CAIRN" token create admin
ADMIN=$(cat "$LAST_STDOUT")
run_ok "$CAIRN" token create --read-only viewer
RO=$(cat "$LAST_STDOUT")
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" tank/vol

# ---- a read-only token changes nothing, whatever the verb ----
for call in "PATCH /api/v1/pools/tank/properties {\"autoexpand\":\"on\"}" \
    "POST /api/v1/pools/tank/vdevs {\"spares\":[\"$T/dev/e\"]}" \
    "POST /api/v1/pools/tank/offline {\"device\":\"$T/dev/a\"}" \
    "POST /api/v1/pools/tank/attach {\"device\":\"$T/dev/a\",\"new_device\":\"$T/dev/c\"}" \
    "POST /api/v1/pools/tank/detach {\"device\":\"$T/dev/a\"}" \
    "POST /api/v1/pools/tank/replace {\"old_device\":\"$T/dev/a\",\"new_device\":\"$T/dev/c\"}" \
    "POST /api/v1/pools/tank/remove {\"device\":\"$T/dev/a\"}" \
    "POST /api/v1/pools/tank/online {\"device\":\"$T/dev/a\"}" \
    "POST /api/v1/datasets/tank/fs/child/inherit {\"prop\":\"compression\"}" \
    "POST /api/v1/iscsi/targets/$TGT/chap {\"user\":\"u\",\"secret\":\"0123456789abcdef\"}"; do
    read -r m p b <<<"$call"
    http "$m" "$p" "$RO" "$b"
    expect_code 403
done
http DELETE "/api/v1/iscsi/targets/$TGT/luns?lun=0" "$RO"
expect_code 403
[ "$(state "$T/dev/a")" = ONLINE ] || fail "a read-only call changed the pool"
run_ok "$CAIRN" pool get -H autoexpand tank
expect_stdout $'\toff\t'
pass "a read-only token gets 403 for each disk-service verb; nothing changed"

# ---- offline / online ----
http POST /api/v1/pools/tank/offline "$ADMIN" "{\"device\":\"$T/dev/a\"}"
expect_code 200
[ "$(state "$T/dev/a")" = OFFLINE ] || fail "offline through the API: $(state "$T/dev/a")"
http POST /api/v1/pools/tank/offline "$ADMIN" "{\"device\":\"$T/dev/b\"}"
expect_code 409
expect_stdout "cannot offline '$T/dev/b': no valid replicas"
[ "$(state "$T/dev/b")" = ONLINE ] || fail "the last side went offline"
http POST /api/v1/pools/tank/online "$ADMIN" "{\"device\":\"$T/dev/a\"}"
expect_code 200
run_ok "$CAIRN" pool wait tank
[ "$(state "$T/dev/a")" = ONLINE ] || fail "online through the API: $(state "$T/dev/a")"
pass "offline/online through the API; offlining the last copy refused with the CLI's message"

# ---- attach / detach / replace ----
http POST /api/v1/pools/tank/attach "$ADMIN" "{\"device\":\"$T/dev/a\",\"new_device\":\"$T/dev/c\"}"
expect_code 200
run_ok "$CAIRN" pool wait tank
[ "$(state "$T/dev/c")" = ONLINE ] || fail "attach: $(state "$T/dev/c")"
http POST /api/v1/pools/tank/detach "$ADMIN" "{\"device\":\"$T/dev/c\"}"
expect_code 200
"$CAIRN" pool status tank | grep -q "$T/dev/c" && fail "detach left $T/dev/c in the pool"
http POST /api/v1/pools/tank/replace "$ADMIN" "{\"old_device\":\"$T/dev/b\",\"new_device\":\"$T/dev/d\"}"
expect_code 200
run_ok "$CAIRN" pool wait tank
[ "$(state "$T/dev/d")" = ONLINE ] || fail "replace: $(state "$T/dev/d")"
"$CAIRN" pool status tank | grep -q "$T/dev/b " && fail "replace left $T/dev/b in the pool"
http POST /api/v1/pools/tank/replace "$ADMIN" "{\"old_device\":\"$T/dev/nope\",\"new_device\":\"$T/dev/b\"}"
expect_code 404
pass "attach, detach and replace through the API, resilvered"

# ---- spares, pool properties ----
http POST /api/v1/pools/tank/vdevs "$ADMIN" "{\"spares\":[\"$T/dev/e\"]}"
expect_code 200
run_ok "$CAIRN" pool status tank
expect_stdout 'spares'
expect_stdout "$T/dev/e +AVAIL"
http POST /api/v1/pools/tank/remove "$ADMIN" "{\"device\":\"$T/dev/e\"}"
expect_code 200
"$CAIRN" pool status tank | grep -q "$T/dev/e" && fail "spare not removed"
http PATCH /api/v1/pools/tank/properties "$ADMIN" '{"autoexpand":"on"}'
expect_code 200
run_ok "$CAIRN" pool get -H autoexpand tank
expect_stdout $'\ton\t'
http PATCH /api/v1/pools/tank/properties "$ADMIN" '{"autoexpand":"maybe"}'
expect_code 400
pass "spare added and removed, pool property set, a bad value refused"

# ---- datasets: inherit ----
http POST /api/v1/datasets/tank/fs/child/inherit "$ADMIN" '{"prop":"compression"}'
expect_code 200
run_ok "$CAIRN" get -H -o value,source compression tank/fs/child
expect_stdout '^lz4	inherited from tank/fs$'
pass "dataset property inherited through the API"

# ---- iSCSI: CHAP, LUN removal ----
http POST "/api/v1/iscsi/targets/$TGT/chap" "$ADMIN" '{"user":"alice","secret":"0123456789abcdef"}'
expect_code 200
run_ok "$CAIRN" iscsi list -H "$TGT"
expect_stdout $'\tset\t'
http DELETE "/api/v1/iscsi/targets/$TGT/luns?lun=0" "$ADMIN"
expect_code 200
run_ok "$CAIRN" iscsi list "$TGT"
grep -q 'tank/vol' "$LAST_STDOUT" && fail "LUN 0 still there: $(cat "$LAST_STDOUT")"
pass "CHAP set and a LUN removed through the API"

# ---- events and history read back ----
http GET "/api/v1/pools/tank/events" "$ADMIN"
expect_code 200
expect_stdout 'statechange'
expect_stdout 'vdev_attach|attach'
http GET "/api/v1/pools/tank/history" "$RO"
expect_code 200
for what in "api: POST /api/v1/pools/tank/offline" "api: POST /api/v1/pools/tank/replace" \
    "api: PATCH /api/v1/pools/tank/properties autoexpand=on"; do
    grep -qF "$what" "$LAST_STDOUT" || fail "history lacks '$what': $(head -c 600 "$LAST_STDOUT")"
done
pass "events and history through the API, the API's changes in the history"
