#!/usr/bin/env bash
# Analytics (cairn analytics list|enable|disable|show, /api/v1/analytics) against
# known client traffic: N NFSv3 WRITEs of a libnfs client to share X, M NFSv4 READs
# of a raw NFSv4.1 client on share Y, K iSCSI WRITE(16)s of a libiscsi initiator,
# each found exactly in its drill-down buckets (operation, file, share, client,
# initiator, target/LUN), through the CLI and through HTTP; a drill-down switched
# off stops counting and its switch survives a restart, as does the history; bad
# statistic, drill-down and resolution names are one-line errors, alike in the
# CLI and the API (the same request); live output with -i.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

command -v curl >/dev/null || { echo "skip: curl is not installed"; exit 77; }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

HPORT=$(cairn_random_port)
U="https://127.0.0.1:$HPORT"
TGT=iqn.2026-12.org.cairn.test:analytics
INITIATOR=iqn.2026-11.org.cairn.test:client # iscsi_client's
sparse_files "$T/dev" 2G a

# ---- the knobs: a bad retention is one line naming it; analytics = 0 starts all off ----
printf 'analytics_retention_days = 400\n' >"$T/bad.conf"
rc=0
"$CAIRND" --foreground --config "$T/bad.conf" --state-dir "$T/bad" 2>"$LAST_STDERR" || rc=$?
[ "$rc" -ne 0 ] && [ "$(wc -l <"$LAST_STDERR")" -eq 1 ] && expect_stderr 'analytics_retention_days'
printf 'analytics = 0\n' >"$T/off.conf"
daemon_start d0 --config "$T/off.conf"
run_ok "$CAIRN" analytics list -H
[ "$(cut -f2 "$LAST_STDOUT" | sort -u)" = no ] || fail "analytics = 0: $(cat "$LAST_STDOUT")"
daemon_stop
pass "analytics_retention_days out of range refused in one line; analytics = 0 starts with all off"

start() {
    nfs_daemon_start d1 --http-listen "127.0.0.1:$HPORT"
    ISCSI_PORT=$(grep -a 'iscsi: listening on port' "$T/d1.daemon.log" | tail -n 1 | sed -E 's/.*port ([0-9]+).*/\1/')
}
start
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" token create admin1
ADMIN=$(cat "$LAST_STDOUT")
run_ok "$CAIRN" token create --read-only viewer
RO=$(cat "$LAST_STDOUT")
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/x
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/y
run_ok "$CAIRN" create -V 16M tank/vol
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" tank/vol

# ---- the catalogue and its defaults: cheap drill-downs on, client and file off ----
run_ok "$CAIRN" analytics list -H
for stat in nfs3.ops nfs4.ops iscsi.ops arc.accesses disk.ops disk.busy disk.usecs net.bytes cpu.usecs; do
    grep -q "^$stat	yes	" "$LAST_STDOUT" || fail "analytics list lacks $stat (on): $(cat "$LAST_STDOUT")"
done
expect_stdout '^nfs3.ops	yes	op\*,client,share\*,file,latency\*,size\*,op-latency,client-op,client-file	'
expect_stdout '^iscsi.ops	yes	op\*,latency\*,size\*,initiator\*,target\*,op-latency,initiator-op	'
expect_stdout '^arc.accesses	yes	result\*,dataset\*	'
pass "analytics list: the statistics, cheap drill-downs on, client and file off"

# ---- bad names: one line naming what is wrong, the same through HTTP ----
run_fail "$CAIRN" analytics show nfs3.opz
expect_stderr "no statistic named 'nfs3.opz' \(there are: nfs3.ops, "
run_fail "$CAIRN" analytics show nfs3.ops --by initiator
expect_stderr "nfs3.ops has no drill-down by 'initiator' \(it has: op, client, share, file, latency, size, op-latency, client-op, client-file\)"
run_fail "$CAIRN" analytics enable iscsi.ops --by colour
expect_stderr "iscsi.ops has no drill-down by 'colour'"
run_fail "$CAIRN" analytics show nfs3.ops -r fortnight
expect_stderr "no resolution 'fortnight'"
run_fail "$CAIRN" analytics show nfs3.ops -w 0
expect_stderr "bad window '0'"
run_fail "$CAIRN" analytics frobnicate
expect_stderr "unknown subcommand 'frobnicate'"
http GET "/api/v1/analytics/nfs3.opz" "$ADMIN"
expect_code 400
expect_stdout "^\{\"error\":\"no statistic named 'nfs3.opz' \(there are: "
http GET "/api/v1/analytics/nfs3.ops?by=initiator" "$ADMIN"
expect_code 400
expect_stdout "nfs3.ops has no drill-down by 'initiator'"
http POST /api/v1/analytics/nfs3.ops/enable "$RO" '{"by":"file"}'
expect_code 403
run_ok "$CAIRN" analytics list -H
expect_stdout '^nfs3.ops	yes	op\*,client,share\*,file,'
pass "bad statistic/drill-down/resolution names refused in one line (CLI and HTTP); read-only token refused"

# ---- drill-downs on demand: file by the CLI, client through the API ----
run_ok "$CAIRN" analytics enable nfs3.ops --by file
run_ok "$CAIRN" analytics enable nfs3.ops --by op-latency
run_ok "$CAIRN" analytics enable nfs3.ops --by client-op
run_ok "$CAIRN" analytics enable nfs3.ops --by client-file
run_ok "$CAIRN" analytics enable iscsi.ops --by initiator-op
http POST /api/v1/analytics/nfs3.ops/enable "$ADMIN" '{"by":"client"}'
expect_code 200
run_ok "$CAIRN" analytics enable nfs4.ops --by client
run_ok "$CAIRN" analytics list -H
expect_stdout '^nfs3.ops	yes	op\*,client\*,share\*,file\*,'
pass "client and file drill-downs enabled (CLI and API)"

# ---- known traffic ----
# The NFSv4 file is written before the v4 file drill-down is on: only the READs count there.
run_ok "$NFSCLIENT" "nfs://127.0.0.1/tank/y?nfsport=$NFS_PORT&version=4" put f4 "read over NFSv4"
run_ok "$CAIRN" analytics enable nfs4.ops --by file
run_ok "$CAIRN" analytics enable nfs4.ops --by op-latency
N=32 # FILE_SYNC WRITEs of 64 KiB to /tank/x/counted
run_ok "$NFSCLIENT" "$(nfs_url /tank/x)" stream counted 2 64 0
M=7 # NFSv4.1 READs of /tank/y/f4, a COMPOUND each
nfs4_rpc /tank/y analytics reads f4 "$M"
K=40 # 4 KiB WRITE(16)s, then read back
run_ok "$CAIRN_BIN/iscsi_client" write "127.0.0.1:$ISCSI_PORT" "$TGT" 7 "$K" 2

# count STAT BY NAME [WINDOW]: NAME's COUNT in `analytics show STAT --by BY` (0: absent).
count() {
    run_ok "$CAIRN" analytics show "$1" --by "$2" -w "${4:-600}" -H -p
    awk -F'\t' -v n="$3" '$1 == n {c = $2} END {print c + 0}' "$LAST_STDOUT"
}
total() {
    run_ok "$CAIRN" analytics show "$1" -w "${2:-600}" -H -p
    awk -F'\t' '$1 == "total" {print $2}' "$LAST_STDOUT"
}
# The sampler files each second when it ends, in order: wait until the last
# traffic, the READ(16)s that read the iSCSI writes back (16 blocks each), is in,
# however slow the machine. (Waiting for the writes and then 1.2 s let a late
# sampler file the READ-backs between reading a total and its parts.)
for i in $(seq 1 300); do
    [ "$(count iscsi.ops op 'READ(16)')" -ge $(((K + 15) / 16)) ] && break
    sleep 0.2
done

V3=$(total nfs3.ops)
[ "$(count nfs3.ops op WRITE)" -eq "$N" ] || fail "nfs3.ops by op: WRITE $(count nfs3.ops op WRITE), not $N"
[ "$(count nfs3.ops file /tank/x/counted)" -eq "$N" ] ||
    fail "nfs3.ops by file: $(cat "$LAST_STDOUT")"
X3=$(count nfs3.ops share /tank/x)
[ $((X3 + $(count nfs3.ops share -))) -eq "$V3" ] && [ "$X3" -gt "$N" ] ||
    fail "nfs3.ops by share (total $V3): $(cat "$LAST_STDOUT")"
[ "$(count nfs3.ops share /tank/y)" -eq 0 ] || fail "nfs3.ops counted share /tank/y"
[ "$(count nfs3.ops client 127.0.0.1)" -eq "$V3" ] || fail "nfs3.ops by client (total $V3): $(cat "$LAST_STDOUT")"
LAT=$(run_ok "$CAIRN" analytics show nfs3.ops --by latency -w 600 -H -p; awk -F'\t' '{s += $2} END {print s}' "$LAST_STDOUT")
[ "$LAT" -eq "$V3" ] || fail "nfs3.ops latency histogram holds $LAT calls of $V3"
[ "$(count nfs3.ops size 64K)" -ge "$N" ] || fail "nfs3.ops by size: $(cat "$LAST_STDOUT")"
OPLAT=$(run_ok "$CAIRN" analytics show nfs3.ops --by op-latency -w 600 -H -p; awk -F'\t' '$1 ~ /^WRITE / {s += $2} END {print s + 0}' "$LAST_STDOUT")
[ "$(count nfs3.ops client-op '127.0.0.1 WRITE')" -eq "$N" ] || fail "nfs3.ops by client-op: $(cat "$LAST_STDOUT")"
[ "$(count nfs3.ops client-file '127.0.0.1 /tank/x/counted')" -eq "$N" ] ||
    fail "nfs3.ops by client-file: $(cat "$LAST_STDOUT")"
[ "$OPLAT" -eq "$N" ] || fail "nfs3.ops op-latency holds $OPLAT WRITEs, not $N: $(cat "$LAST_STDOUT")"
pass "NFSv3: $N WRITEs from 127.0.0.1 to /tank/x counted as WRITE $N, file /tank/x/counted $N, WRITE latencies $N, client 127.0.0.1's WRITEs and file $N; share, client, latency sum to the total $V3"

V4=$(total nfs4.ops)
[ "$(count nfs4.ops op READ)" -eq "$M" ] || fail "nfs4.ops by op: READ $(count nfs4.ops op READ), not $M"
[ "$(count nfs4.ops file /tank/y/f4)" -eq "$M" ] || fail "nfs4.ops by file: $(cat "$LAST_STDOUT")"
[ "$(count nfs4.ops client 127.0.0.1)" -eq "$V4" ] || fail "nfs4.ops by client (total $V4): $(cat "$LAST_STDOUT")"
# A COMPOUND's latency goes to its first op past SEQUENCE and PUTFH: READ, M times.
READLAT=$(run_ok "$CAIRN" analytics show nfs4.ops --by op-latency -w 600 -H -p; awk -F'\t' '$1 ~ /^READ / {s += $2} END {print s + 0}' "$LAST_STDOUT")
[ "$READLAT" -eq "$M" ] || fail "nfs4.ops op-latency holds $READLAT READs, not $M: $(cat "$LAST_STDOUT")"
grep -q '^SEQUENCE \|^PUTFH ' "$LAST_STDOUT" && fail "nfs4.ops op-latency charged SEQUENCE/PUTFH: $(cat "$LAST_STDOUT")"
SUM4=$(run_ok "$CAIRN" analytics show nfs4.ops --by op -w 600 -H -p; awk -F'\t' '{s += $2} END {print s}' "$LAST_STDOUT")
[ "$SUM4" -eq "$V4" ] || fail "nfs4.ops by op sums to $SUM4, not the total $V4"
pass "NFSv4: $M READs counted as READ $M, file /tank/y/f4 $M and READ latencies $M; by client and by op sum to the total $V4"

VI=$(total iscsi.ops)
[ "$(count iscsi.ops op 'WRITE(16)')" -eq "$K" ] || fail "iscsi.ops by op: $(cat "$LAST_STDOUT")"
[ "$(count iscsi.ops initiator-op "$INITIATOR WRITE(16)")" -eq "$K" ] || fail "iscsi.ops by initiator-op: $(cat "$LAST_STDOUT")"
[ "$(count iscsi.ops initiator "$INITIATOR")" -eq "$VI" ] || fail "iscsi.ops by initiator (total $VI): $(cat "$LAST_STDOUT")"
[ "$(count iscsi.ops target "$TGT lun 0")" -ge "$K" ] || fail "iscsi.ops by target: $(cat "$LAST_STDOUT")"
[ "$(count net.bytes protocol 'iscsi write')" -eq $((K * 4096)) ] || fail "net.bytes: $(cat "$LAST_STDOUT")"
[ "$(count net.bytes protocol 'nfs3 write')" -eq $((N * 65536)) ] || fail "net.bytes: $(cat "$LAST_STDOUT")"
[ "$(count net.bytes initiator "$INITIATOR")" -ge $((K * 4096)) ] || fail "net.bytes by initiator: $(cat "$LAST_STDOUT")"
[ "$(count disk.ops disk "$T/dev/a")" -gt 0 ] || fail "disk.ops by disk: $(cat "$LAST_STDOUT")"
[ "$(count disk.usecs disk "$T/dev/a")" -gt 0 ] || fail "disk.usecs by disk: $(cat "$LAST_STDOUT")"
[ "$(count disk.busy disk "$T/dev/a")" -gt 0 ] || fail "disk.busy by disk: $(cat "$LAST_STDOUT")"
[ "$(total cpu.usecs)" -gt 0 ] || fail "no CPU time"
[ "$(count arc.accesses dataset 'tank (MOS)')" -gt 0 ] || fail "arc.accesses by dataset: $(cat "$LAST_STDOUT")"
pass "iSCSI: $K WRITE(16)s counted as $K, initiator and target/LUN hold the total $VI; net.bytes, disk.ops, cpu.usecs, the MOS's ARC lookups"

# ---- the same figures through HTTP ----
http GET "/api/v1/analytics/nfs3.ops?by=op&window=600&samples=true" "$RO"
expect_code 200
"$PY" - "$LAST_STDOUT" "$N" <<'EOF' || fail "HTTP nfs3.ops by op: $(head -c 400 "$LAST_STDOUT")"
import json, sys
d = json.load(open(sys.argv[1])); n = int(sys.argv[2])
v = {x["name"]: int(x["value"]) for x in d["values"]}
assert v["WRITE"] == n, v
per_sample = sum(int(x["value"]) for s in d["samples"] for x in s.get("values", []) if x["name"] == "WRITE")
assert per_sample == n, per_sample
assert all(s["seconds"] == 1 for s in d["samples"]) and d["resolution"] == "second"
EOF
http GET "/api/v1/analytics/iscsi.ops?by=initiator&window=600" "$ADMIN"
expect_code 200
expect_stdout "\"name\":\"$INITIATOR\""
http GET /api/v1/analytics "$RO"
expect_code 200
expect_stdout '"name":"nfs3.ops"'
expect_stdout '"retention_hours":720[,}]' # analytics_retention_days' default, 30
pass "HTTP: the same counts (and per-second samples summing to them)"

# ---- live output ----
run_ok "$CAIRN" analytics show nfs3.ops -i 1 2
[ "$(wc -l <"$LAST_STDOUT")" -eq 3 ] || fail "show -i 1 2: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" analytics show nfs3.ops --by op -i 1 1
expect_stdout 'nfs3.ops [0-9.]+/s by op'
pass "live output (-i SECS COUNT)"

# ---- a drill-down switched off stops counting; the rest goes on ----
run_ok "$CAIRN" analytics disable nfs3.ops --by file
run_ok "$NFSCLIENT" "$(nfs_url /tank/x)" stream counted2 2 64 0
for i in $(seq 1 100); do
    [ "$(count nfs3.ops op WRITE)" -ge $((2 * N)) ] && break
    sleep 0.2
done
[ "$(count nfs3.ops op WRITE)" -eq $((2 * N)) ] || fail "WRITEs after disable: $(cat "$LAST_STDOUT")"
[ "$(count nfs3.ops file /tank/x/counted2)" -eq 0 ] || fail "the disabled file drill-down counted"
[ "$(count nfs3.ops file /tank/x/counted)" -eq "$N" ] || fail "the file drill-down's history changed"
pass "disable --by file: new WRITEs counted by op ($((2 * N))), none by file"

# ---- a restart keeps the history and the switches ----
daemon_stop
[ -s "$T/d1/analytics.dat" ] || fail "no STATE_DIR/analytics.dat"
start
[ "$(count nfs3.ops op WRITE)" -eq $((2 * N)) ] || fail "after a restart: $(cat "$LAST_STDOUT")"
[ "$(count nfs3.ops file /tank/x/counted)" -eq "$N" ] || fail "after a restart, by file: $(cat "$LAST_STDOUT")"
[ "$(count iscsi.ops op 'WRITE(16)')" -eq "$K" ] || fail "after a restart, iSCSI: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" analytics list -H
expect_stdout '^nfs3.ops	yes	op\*,client\*,share\*,file,'
http GET "/api/v1/analytics/nfs4.ops?by=op&window=600" "$ADMIN"
expect_code 200
expect_stdout "\"name\":\"READ\",\"value\":$M"
pass "restart: history (WRITE $((2 * N)), file $N, iSCSI $K) and switches (client on, file off) kept"
# The ARC came back empty: reading the file now goes through it, under its dataset.
run_ok "$NFSCLIENT" "$(nfs_url /tank/y)" get f4 # NFSv3: NFSv4 is in its grace period
for i in $(seq 1 50); do
    [ "$(count arc.accesses dataset tank/y)" -gt 0 ] && break
    sleep 0.2
done
[ "$(count arc.accesses dataset tank/y)" -gt 0 ] || fail "arc.accesses by dataset: $(cat "$LAST_STDOUT")"
pass "arc.accesses by dataset: reads of /tank/y's file counted under tank/y"

# ---- a disabled statistic records nothing ----
run_ok "$CAIRN" analytics disable iscsi.ops
run_ok "$CAIRN_BIN/iscsi_client" write "127.0.0.1:$ISCSI_PORT" "$TGT" 8 4 2
sleep 1.2
[ "$(count iscsi.ops op 'WRITE(16)')" -eq "$K" ] || fail "a disabled statistic counted: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" analytics list -H
expect_stdout '^iscsi.ops	no	'
pass "disable STAT: nothing recorded"
daemon_stop
