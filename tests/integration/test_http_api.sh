#!/usr/bin/env bash
# cairnd's HTTPS plane (--http-listen): API tokens (cairn token create/list/revoke),
# 401 without or with a wrong token and nothing changed, 403 for a read-only token's
# changes, datasets created/set/destroyed through the REST API and seen by the CLI
# (and the reverse), errors as the CLI's one-line messages, the OpenAPI document
# walked path by path, /metrics parsed strictly and its NFS and iSCSI counters
# checked against known client traffic (N NFSv3 WRITEs of a libnfs client, N iSCSI
# WRITEs of libiscsi), a bad certificate setting refused at start, and brute force
# answered 429.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

command -v curl >/dev/null || { echo "skip: curl is not installed"; exit 77; }
PY=/usr/bin/python3 # Debian's, where python3-prometheus-client lives
[ -x "$PY" ] || PY=python3
CHECK="$PY $CAIRN_SRC/tests/integration/http_check.py"

HPORT=$(cairn_random_port)
U="https://127.0.0.1:$HPORT"
TGT=iqn.2026-12.org.cairn.test:http
sparse_files "$T/dev" 2G a

# ---- a bad setting is one line naming the key; nothing starts ----
rc=0
"$CAIRND" --foreground --state-dir "$T/bad" --http-listen 127.0.0.1:notaport 2>"$LAST_STDERR" || rc=$?
[ "$rc" -ne 0 ] && [ "$(wc -l <"$LAST_STDERR")" -eq 1 ] && expect_stderr 'http_listen'
echo "not a certificate" >"$T/bad.pem"
printf 'http_cert = %s\nhttp_key = %s\n' "$T/bad.pem" "$T/bad.pem" >"$T/bad.conf"
rc=0
"$CAIRND" --foreground --config "$T/bad.conf" --state-dir "$T/bad" --socket "$T/bad.sock" \
    --nfs-listen 127.0.0.1:0 --mount-listen 127.0.0.1:0 --portmap-listen 127.0.0.1:0 \
    --iscsi-listen 127.0.0.1:0 --http-listen "127.0.0.1:$HPORT" 2>"$LAST_STDERR" || rc=$?
[ "$rc" -ne 0 ] || fail "cairnd started with a bad certificate"
expect_stderr 'http_cert'
printf 'http_cert = %s\n' "$T/bad.pem" >"$T/bad.conf"
rc=0
"$CAIRND" --foreground --config "$T/bad.conf" --state-dir "$T/bad" 2>"$LAST_STDERR" || rc=$?
[ "$rc" -ne 0 ] && expect_stderr 'http_cert is set without http_key'
pass "bad HTTPS settings refused with a line naming the key"

nfs_daemon_start d1 --http-listen "127.0.0.1:$HPORT"
ISCSI_PORT=$(grep -a 'iscsi: listening on port' "$T/d1.daemon.log" | tail -n 1 | sed -E 's/.*port ([0-9]+).*/\1/')
[ -s "$T/d1/http-cert.pem" ] && [ "$(stat -c %a "$T/d1/http-key.pem")" = 600 ] ||
    fail "no self-signed certificate (or a key readable by others) in the state dir"
run_ok "$CAIRN" pool create tank "$T/dev/a"

# ---- tokens ----
run_ok "$CAIRN" token create admin1
ADMIN=$(cat "$LAST_STDOUT")
[[ "$ADMIN" =~ ^cairn_[0-9a-f]{64}$ ]] || fail "token create printed '$ADMIN'"
run_ok "$CAIRN" token create --read-only viewer
RO=$(cat "$LAST_STDOUT")
run_ok "$CAIRN" token create gone
GONE=$(cat "$LAST_STDOUT")
run_fail "$CAIRN" token create admin1
expect_stderr "token 'admin1' already exists"
run_fail "$CAIRN" token create 'bad name'
expect_stderr 'bad token name'
run_ok "$CAIRN" token revoke gone
run_fail "$CAIRN" token revoke gone
expect_stderr "no token named 'gone'"
run_ok "$CAIRN" token list -H
[ "$(cut -f1,2 "$LAST_STDOUT" | tr '\t\n' ' ')" = "admin1 admin viewer read-only " ] ||
    fail "token list: $(cat "$LAST_STDOUT")"
grep -q "$ADMIN" "$T/d1/http-tokens" && fail "the token store holds a token in the clear"
pass "token create/list/revoke; only hashes stored"
expect_error() {
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert list(d)==["error"] and "\n" not in d["error"], d' \
        "$LAST_STDOUT" || fail "not a JSON error: $(cat "$LAST_STDOUT")"
    expect_stdout "$1"
}

# ---- 401: no token, a wrong one, a revoked one; nothing changes ----
http POST /api/v1/datasets "" '{"name":"tank/nope"}'
expect_code 401
expect_error 'API token is needed'
http POST /api/v1/datasets "cairn_$(printf '0%.0s' {1..64})" '{"name":"tank/nope"}'
expect_code 401
expect_error 'not valid'
http DELETE /api/v1/datasets/tank "$GONE"
expect_code 401
http GET /metrics ""
expect_code 401
run_ok "$CAIRN" list -H -o name
[ "$(cat "$LAST_STDOUT")" = "tank" ] || fail "a refused request changed something: $(cat "$LAST_STDOUT")"
pass "401 without, with a wrong and with a revoked token; nothing changed"

# ---- read-only: reads work, changes are 403 ----
http GET /api/v1/pools "$RO"
expect_code 200
expect_stdout '"name":"tank"'
http POST /api/v1/datasets "$RO" '{"name":"tank/ro"}'
expect_code 403
expect_error "read-only"
http POST /api/v1/pools/tank/scrub "$RO" '{}'
expect_code 403
run_ok "$CAIRN" list -H -o name
[ "$(cat "$LAST_STDOUT")" = "tank" ] || fail "a read-only token changed something"
pass "read-only token: GET 200, POST 403, nothing changed"

# ---- datasets through the API, seen by the CLI, and the reverse ----
http POST /api/v1/datasets "$ADMIN" '{"name":"tank/api","props":[{"name":"compression","value":"lz4"}]}'
expect_code 201
run_ok "$CAIRN" get -H -o value compression tank/api
[ "$(cat "$LAST_STDOUT")" = lz4 ] || fail "created through the API: compression $(cat "$LAST_STDOUT")"
http PATCH /api/v1/datasets/tank/api "$ADMIN" '{"compression":"gzip-3","atime":"off"}'
expect_code 200
run_ok "$CAIRN" get -H -o value compression,atime tank/api
[ "$(tr '\n' ' ' <"$LAST_STDOUT")" = "gzip-3 off " ] || fail "PATCH: $(cat "$LAST_STDOUT")"
# An error is the CLI's own line, and changes nothing.
run_fail "$CAIRN" set compression=bogus tank/api
CLI_ERR=$(sed 's/^cairn: //' "$LAST_STDERR")
http PATCH /api/v1/datasets/tank/api "$ADMIN" '{"compression":"bogus"}'
expect_code 400
"$PY" -c 'import json,sys; assert json.load(open(sys.argv[1]))["error"] == sys.argv[2]' "$LAST_STDOUT" "$CLI_ERR" ||
    fail "API error '$(cat "$LAST_STDOUT")' is not the CLI's '$CLI_ERR'"
http POST /api/v1/datasets "$ADMIN" '{"name":"tank/api"}'
expect_code 409
# Changes made through the API are in the pool's history as the CLI's are; a
# refused one is not.
run_ok "$CAIRN" pool history -l tank
expect_stdout 'api: POST /api/v1/datasets .*token admin1 from'
expect_stdout 'api: PATCH /api/v1/datasets/tank/api compression=gzip-3'
expect_stdout 'api: PATCH /api/v1/datasets/tank/api atime=off'
! grep -q 'compression=bogus' "$LAST_STDOUT" || fail "a refused PATCH is in the pool's history"
http POST /api/v1/datasets "$ADMIN" '{"nmae":"tank/x"}'
expect_code 400
expect_error "unknown field 'nmae'"
http POST /api/v1/datasets "$ADMIN" 'not json'
expect_code 400
http GET /api/v1/datasets/tank/nothere "$ADMIN"
expect_code 404
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
http GET /api/v1/datasets "$ADMIN"
expect_code 200
expect_stdout '"name":"tank/share"'
http GET /api/v1/datasets/tank/share "$ADMIN"
expect_code 200
"$PY" -c '
import json, sys
props = {p["name"]: p["value"] for p in json.load(open(sys.argv[1]))["props"]}
assert props["sharenfs"] == "no_root_squash", props' "$LAST_STDOUT" || fail "GET dataset: $(cat "$LAST_STDOUT")"
http DELETE /api/v1/datasets/tank/api "$ADMIN"
expect_code 200
run_fail "$CAIRN" list tank/api
# The reverse: made by the CLI, destroyed through the API.
run_ok "$CAIRN" create tank/cli
http DELETE /api/v1/datasets/tank/cli "$ADMIN"
expect_code 200
run_fail "$CAIRN" list tank/cli
http DELETE /api/v1/datasets/tank/api "$ADMIN"
expect_code 404
expect_error 'tank/api'
grep -aq "http: 127.0.0.1: token 'admin1' DELETE /api/v1/datasets/tank/api -> 200" "$T/d1.daemon.log" ||
    fail "the change is not in the log (audit)"
pass "create/set/destroy through the API, seen by the CLI; CLI's errors; audit log"

# ---- snapshots and iSCSI targets through the API ----
echo "before the snapshot" >"$T/snapfile"
run_ok nfs-cp "$T/snapfile" "$(nfs_url /tank/share/snapfile)"
http POST /api/v1/snapshots "$ADMIN" '{"name":"tank/share@s1"}'
expect_code 201
run_ok "$CAIRN" list -H -t snapshot -o name
[ "$(cat "$LAST_STDOUT")" = "tank/share@s1" ] || fail "snapshot: $(cat "$LAST_STDOUT")"
http GET /api/v1/snapshots "$ADMIN"
expect_code 200
expect_stdout '"name":"tank/share@s1"'
run_ok "$NFSCLIENT" "$(nfs_url /tank/share)" rm snapfile
http POST /api/v1/snapshots/tank/share@s1/clone "$ADMIN" '{"name":"tank/clone"}'
expect_code 201
http POST /api/v1/snapshots/tank/share@s1/rollback "$ADMIN" '{}'
expect_code 200
run_ok nfs-cat "$(nfs_url /tank/share/snapfile)"
[ "$(cat "$LAST_STDOUT")" = "before the snapshot" ] || fail "rollback through the API: $(cat "$LAST_STDOUT")"
http DELETE /api/v1/snapshots/tank/share@s1 "$ADMIN"
expect_code 409 # its clone holds it, as with the CLI
http POST /api/v1/datasets/tank/clone/rename "$ADMIN" '{"new_name":"tank/clone2"}'
expect_code 200
run_ok "$CAIRN" list -H -o name -r tank
expect_stdout '^tank/clone2$'
TGT2=iqn.2026-12.org.cairn.test:api
http POST /api/v1/iscsi/targets "$ADMIN" "{\"name\":\"$TGT2\"}"
expect_code 201
run_ok "$CAIRN" create -V 8M tank/apivol
http POST "/api/v1/iscsi/targets/$TGT2/luns" "$ADMIN" '{"volume":"tank/apivol","lun":5,"lun_given":true}'
expect_code 201
http POST "/api/v1/iscsi/targets/$TGT2/acl" "$ADMIN" '{"initiator":"iqn.2026-12.org.cairn.test:host"}'
expect_code 200
run_ok "$CAIRN" iscsi list -H
expect_stdout "^$TGT2	5	tank/apivol	"
http POST /api/v1/iscsi/targets "$ADMIN" '{"name":"Not.An.IQN"}'
expect_code 400
expect_error 'not an iSCSI name'
pass "snapshots (create, list, clone, rollback, refused destroy), rename, iSCSI target/LUN/ACL"

# ---- pools: create, export, import, destroy through the API ----
sparse_files "$T/dev" 1G b c
http POST /api/v1/pools "$ADMIN" "{\"name\":\"tank2\",\"root\":{\"type\":\"ROOT\",\"children\":[
  {\"type\":\"MIRROR\",\"children\":[{\"type\":\"LEAF\",\"path\":\"$T/dev/b\"},{\"type\":\"LEAF\",\"path\":\"$T/dev/c\"}]}]}}"
expect_code 201
expect_stdout '"health":"ONLINE"'
run_ok "$CAIRN" pool status tank2
expect_stdout 'mirror-0'
http POST /api/v1/pools "$ADMIN" '{"name":"tank3","root":{"type":"ROOT","children":[{"type":"LEAF","path":"dev/x"}]}}'
expect_code 400
expect_error 'device paths must be absolute'
http POST /api/v1/pools/tank2/export "$ADMIN" '{}'
expect_code 200
run_fail "$CAIRN" pool status tank2
http POST /api/v1/pools/import "$ADMIN" "{\"name\":\"tank2\",\"dirs\":[\"$T/dev\"]}"
expect_code 200
run_ok "$CAIRN" pool status tank2
http DELETE /api/v1/pools/tank2 "$ADMIN"
expect_code 200
run_fail "$CAIRN" pool status tank2
pass "pool create (a mirror), export, import, destroy through the API"

# ---- OpenAPI: every documented GET answers ----
run_ok "$CAIRN" pool scrub tank
run_ok "$CAIRN" pool wait tank
run_ok $CHECK openapi "$U" "$ADMIN" name=tank "/iscsi/targets/{name}=$TGT2" id=scan-tank "/analytics/{name}=nfs3.ops"
expect_stdout 'walked [0-9]+ GET paths'
pass "OpenAPI document walked: $(cat "$LAST_STDOUT")"

# ---- /metrics against known traffic ----
metric() { grep -F "$1 " "$T/metrics.txt" | awk '{print $NF}'; }
scrape() { $CHECK metrics "$U" "$ADMIN" >"$T/metrics.txt" || fail "metrics: $(cat "$T/metrics.txt")"; }
scrape
W0=$(metric 'cairn_nfs_operations_total{op="WRITE",version="3"}')
B0=$(metric 'cairn_nfs_written_bytes_total{version="3"}')
C0=$(metric 'cairn_nfs_request_duration_seconds_count{version="3"}')
[ -n "$W0" ] && [ -n "$B0" ] || fail "no NFSv3 WRITE counters in /metrics"
run_ok "$CAIRN" create -o sharenfs=on tank/other
scrape
SHARE='{dataset="tank/share",share="/tank/share"}'
OTHER='{dataset="tank/other",share="/tank/other"}'
SW0=$(metric "cairn_nfs_share_written_bytes_total$SHARE")
SR0=$(metric "cairn_nfs_share_requests_total$SHARE")
declare -A ZIL0
for m in commits log_writes records_written flushes txg_waits; do
    ZIL0[$m]=$(metric "cairn_zil_${m}_total{dataset=\"tank/share\"}")
done
[ -n "$SW0" ] && [ "$(metric "cairn_nfs_share_written_bytes_total$OTHER")" = 0 ] ||
    fail "no per-share counters: $(grep share_ "$T/metrics.txt")"
N=32 # FILE_SYNC WRITEs of 64 KiB: 2 MiB
run_ok "$NFSCLIENT" "$(nfs_url /tank/share)" stream counted 2 64 0
scrape
W1=$(metric 'cairn_nfs_operations_total{op="WRITE",version="3"}')
B1=$(metric 'cairn_nfs_written_bytes_total{version="3"}')
C1=$(metric 'cairn_nfs_request_duration_seconds_count{version="3"}')
[ $((W1 - W0)) -eq "$N" ] || fail "NFSv3 WRITE counter rose by $((W1 - W0)), not $N"
[ $((B1 - B0)) -eq $((N * 65536)) ] || fail "NFSv3 written bytes rose by $((B1 - B0)), not $((N * 65536))"
[ $((C1 - C0)) -ge "$N" ] || fail "NFSv3 latency histogram counted $((C1 - C0)) calls, fewer than $N"
SW1=$(metric "cairn_nfs_share_written_bytes_total$SHARE")
SR1=$(metric "cairn_nfs_share_requests_total$SHARE")
[ $((SW1 - SW0)) -eq $((N * 65536)) ] || fail "share tank/share: written bytes rose by $((SW1 - SW0))"
[ $((SR1 - SR0)) -ge "$N" ] || fail "share tank/share: $((SR1 - SR0)) requests counted for $N WRITEs"
[ "$(metric "cairn_nfs_share_written_bytes_total$OTHER")" = 0 ] || fail "share tank/other counted writes"
pass "NFSv3: $N WRITEs of a libnfs client counted as $((W1 - W0)), $((B1 - B0)) bytes (in total and for the share)"
# The intent log of the share's dataset made each FILE_SYNC WRITE durable (one call in
# flight: a commit, a log write and a flush each); the other dataset's log did nothing.
for m in commits log_writes records_written flushes txg_waits; do
    v=$(metric "cairn_zil_${m}_total{dataset=\"tank/share\"}")
    o=$(metric "cairn_zil_${m}_total{dataset=\"tank/other\"}")
    [ -n "$v" ] && [ -n "${ZIL0[$m]}" ] || fail "no cairn_zil_${m}_total for tank/share"
    d=$((v - ZIL0[$m]))
    if [ "$m" = txg_waits ]; then [ "$d" = 0 ] || fail "sync WRITEs waited for $d txgs"
    else [ "$d" -ge "$N" ] || fail "cairn_zil_${m}_total of tank/share rose by $d, not >= $N"; fi
    [ "$o" = 0 ] || fail "cairn_zil_${m}_total of tank/other is '$o', not 0"
done
# UNSTABLE 1 MiB WRITEs with a COMMIT after each MiB: each COMMIT writes the records
# of its MiB (8 of 128 KiB) as blocks the txg adopts, unless their txg was closing.
LB0=$(metric 'cairn_zil_later_blocks_total{dataset="tank/share"}')
run_ok "$NFSCLIENT" "$(nfs_url /tank/share)" stream unstable 2 1024 1
scrape
LB1=$(metric 'cairn_zil_later_blocks_total{dataset="tank/share"}')
[ -n "$LB0" ] && [ $((LB1 - LB0)) -ge 8 ] ||
    fail "2 MiB of UNSTABLE writes committed per MiB: later_blocks rose by $((LB1 - LB0)), not >= 8"
SW1=$(metric "cairn_nfs_share_written_bytes_total$SHARE") # the NFSv4 checks below start here
pass "intent log: $N sync WRITEs of tank/share: $(($(metric 'cairn_zil_commits_total{dataset="tank/share"}') - ZIL0[commits])) commits, $(($(metric 'cairn_zil_flushes_total{dataset="tank/share"}') - ZIL0[flushes])) flushes"
# Reads: twice, the second from memory on the I/O thread (a READ that would block
# there runs again on a worker and must count once).
R0=$(metric 'cairn_nfs_read_bytes_total{version="3"}')
SRB0=$(metric "cairn_nfs_share_read_bytes_total$SHARE")
run_ok nfs-cp "$(nfs_url /tank/share/counted)" "$T/counted.1"
run_ok nfs-cp "$(nfs_url /tank/share/counted)" "$T/counted.2"
scrape
R1=$(metric 'cairn_nfs_read_bytes_total{version="3"}')
[ $((R1 - R0)) -eq $((2 * N * 65536)) ] || fail "NFSv3 read bytes rose by $((R1 - R0)), not $((2 * N * 65536))"
SRB=$(($(metric "cairn_nfs_share_read_bytes_total$SHARE") - SRB0))
[ "$SRB" -eq $((2 * N * 65536)) ] || fail "share tank/share: read bytes rose by $SRB, not $((2 * N * 65536))"
pass "NFSv3: two reads of the file counted as $((R1 - R0)) bytes"

# NFSv4.0: small files put by libnfs's client, one WRITE each.
V0=$(metric 'cairn_nfs_operations_total{op="WRITE",version="4"}')
VB0=$(metric 'cairn_nfs_written_bytes_total{version="4"}')
NV4=6 BYTES4=0
for i in $(seq 1 $NV4); do
    text="counted over NFSv4, file $i"
    BYTES4=$((BYTES4 + ${#text}))
    run_ok "$NFSCLIENT" "nfs://127.0.0.1/tank/share?nfsport=$NFS_PORT&version=4" put "v4-$i" "$text"
done
scrape
V1=$(metric 'cairn_nfs_operations_total{op="WRITE",version="4"}')
VB1=$(metric 'cairn_nfs_written_bytes_total{version="4"}')
[ $((VB1 - VB0)) -eq $BYTES4 ] || fail "NFSv4 written bytes rose by $((VB1 - VB0)), not $BYTES4"
[ $((V1 - V0)) -eq $NV4 ] || fail "NFSv4 WRITE operations rose by $((V1 - V0)), not $NV4"
SW2=$(metric "cairn_nfs_share_written_bytes_total$SHARE")
[ $((SW2 - SW1)) -eq $BYTES4 ] || fail "share tank/share: NFSv4 written bytes rose by $((SW2 - SW1)), not $BYTES4"
[ "$(metric 'cairn_nfs_operations_total{op="PUTFH",version="4"}')" -ge $NV4 ] || fail "NFSv4 PUTFH not counted"
pass "NFSv4: $NV4 WRITE operations counted as $((V1 - V0)), $((VB1 - VB0)) bytes"

run_ok "$CAIRN" create -V 16M tank/vol
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" tank/vol
IW0=$(metric 'cairn_iscsi_commands_total{kind="write"}')
IB0=$(metric 'cairn_iscsi_written_bytes_total{}')
NB=40 # 4 KiB WRITE(16)s, then read back
run_ok "$CAIRN_BIN/iscsi_client" write "127.0.0.1:$ISCSI_PORT" "$TGT" 7 "$NB" 2
scrape
IW1=$(metric 'cairn_iscsi_commands_total{kind="write"}')
IB1=$(metric 'cairn_iscsi_written_bytes_total{}')
IR1=$(metric 'cairn_iscsi_read_bytes_total{}')
[ $((IW1 - IW0)) -eq "$NB" ] || fail "iSCSI write commands rose by $((IW1 - IW0)), not $NB"
[ $((IB1 - IB0)) -eq $((NB * 4096)) ] || fail "iSCSI written bytes rose by $((IB1 - IB0)), not $((NB * 4096))"
[ "$IR1" -ge $((NB * 4096)) ] || fail "iSCSI read bytes $IR1 below the $((NB * 4096)) read back"
TW=$(metric "cairn_iscsi_target_written_bytes_total{target=\"$TGT\"}")
[ "$TW" -eq $((NB * 4096)) ] || fail "target $TGT: written bytes $TW, not $((NB * 4096))"
[ "$(metric "cairn_iscsi_target_commands_total{kind=\"write\",target=\"$TGT2\"}")" = 0 ] ||
    fail "target $TGT2 counted writes it never had"
[ "$(metric 'cairn_pool_health{pool="tank",state="ONLINE"}')" = 1 ] || fail "pool health not ONLINE"
[ "$(metric 'cairn_pool_size_bytes{pool="tank"}')" -gt 0 ] || fail "no pool size"
grep -q '^cairn_arc_hits_total{} [0-9]' "$T/metrics.txt" || fail "no ARC hits"
grep -q "^cairn_vdev_written_bytes_total{pool=\"tank\",vdev=\"$T/dev/a\"} [1-9]" "$T/metrics.txt" ||
    fail "no vdev bytes written"
pass "iSCSI: $NB WRITEs counted as $((IW1 - IW0)), $((IB1 - IB0)) bytes; pool, vdev and ARC metrics"

# ---- brute force: 429 once an address has failed too often; then even a good token waits ----
for i in $(seq 1 12); do http GET /api/v1/pools "cairn_guess$i"; done
expect_code 429
http GET /api/v1/pools "$ADMIN"
expect_code 429
pass "repeated failures from one address get 429"
daemon_stop

# ---- http_metrics_public=on: /metrics without a token, the API still needs one ----
HPORT2=$(cairn_random_port)
U="https://127.0.0.1:$HPORT2"
printf 'http_listen = 127.0.0.1:%s\nhttp_metrics_public = on\n' "$HPORT2" >"$T/public.conf"
daemon_start d2 --config "$T/public.conf"
http GET /metrics ""
expect_code 200
expect_stdout '^# TYPE cairn_nfs_operations_total counter'
http GET /api/v1/pools ""
expect_code 401
daemon_stop
pass "http_metrics_public=on opens /metrics only"
