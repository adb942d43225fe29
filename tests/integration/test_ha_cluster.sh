#!/usr/bin/env bash
# Two heads, one service: a real two-node Pacemaker/Corosync cluster on this machine
# (ha_lib.sh) runs pools ha1 (prefers node1) and ha2 (prefers node2) with
# ocf:cairn:cairn-pool and an IPaddr2 service address each, with fencing.
# Clients in a third namespace write through each address, NFSv3 FILE_SYNC and
# NFSv4.0 DATA_SYNC4 records (nfs_client hawrite) and iSCSI FUA blocks (iscsi_client hawrite), a failed request
# retried on a new connection or session, while ha1
# is moved (planned, both ways), while node1's cairnd is killed with SIGKILL, and
# while node1's whole namespace is killed. Each time ha1 and its address must come
# up on the partner and the writer go on; every acknowledged record of both
# writers must read back at the end, and ha2's writer, on the head that is never
# disturbed, must never have needed a retry. Takeover times (last ack before the
# event to first ack after it) are printed, not judged.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ha_lib.sh"

ha_require
trap 'rc=$?; [ "$rc" -eq 0 ] || ha_dump_logs; ha_teardown; (exit "$rc"); cairn_test_cleanup' EXIT

# The pools, made by a daemon outside the cluster and exported for it.
sparse_files "$T/disks" 2G ha1.img ha2.img
daemon_start setup
for p in ha1 ha2; do
    run_ok "$CAIRN" pool create "$p" "$T/disks/$p.img"
    run_ok "$CAIRN" create -o sharenfs=no_root_squash "$p/fs"
    run_ok "$CAIRN" create -s -V 1G "$p/vol"
    run_ok "$CAIRN" iscsi target create "iqn.2026-12.org.cairn.ha:$p"
    run_ok "$CAIRN" iscsi lun add "iqn.2026-12.org.cairn.ha:$p" "$p/vol"
    run_ok "$CAIRN" pool export "$p"
done
daemon_stop

ha_network
ha_start_nodes
pass "corosync and pacemaker up on node1 and node2"

# A takeover brings the pool's NFSv4 clients a grace period for their reclaims
# (docs/ha.md). Only clients that held state are recorded, so the retries of a
# writer during grace no longer add records and the list stays at the writers that
# had a file open; but those are rightly in grace, and libnfs's 4.0 client does not
# reclaim (it comes back as a new client), so it waits out the whole grace period,
# which 4.0 cannot end early. Leases and grace are therefore short here; the default
# is a 90 s lease and grace.
printf 'nfs_lease_time = 10\nnfs_grace_time = 10\n' >"$T/ha-cairnd.conf"

# The configuration, with the pcs commands of docs/ha.md (and the test's fence device),
# built in a file and pushed at once so nothing starts half configured.
CIB="$HA_DIR/cairn.xml"
pcsf() { ha_on node1 pcs -f "$CIB" "$@" >"$HA_DIR/pcs.out" 2>&1 || fail "pcs $*: $(cat "$HA_DIR/pcs.out")"; }
ha_on node1 pcs cluster cib "$CIB" || fail "pcs cluster cib"
pcsf property set stonith-enabled=true stonith-timeout=30s
pcsf resource defaults update resource-stickiness=100 migration-threshold=1
pcsf stonith create fence fence_cairn_netns pcmk_host_list="node1 node2" nodes_dir="$HA_NODES_DIR" \
    op monitor interval=60s
for i in 1 2; do
    pcsf resource create "pool_ha$i" ocf:cairn:cairn-pool pool="ha$i" cairn="$CAIRN" cairnd="$CAIRND" \
        state_dir=/run/cairn socket=/run/cairn/cairnd.sock import_dirs="$T/disks" \
        daemon_options="--config $T/ha-cairnd.conf" \
        op monitor interval=2s timeout=20s monitor interval=30s timeout=20s OCF_CHECK_LEVEL=10 \
        start timeout=60s stop timeout=60s
    pcsf resource create "ip_ha$i" ocf:heartbeat:IPaddr2 ip="10.99.0.10$i" cidr_netmask=24 nic=eth0 \
        op monitor interval=5s
    pcsf constraint colocation add "ip_ha$i" with "pool_ha$i" INFINITY
    pcsf constraint order start "pool_ha$i" then start "ip_ha$i"
    pcsf constraint location "pool_ha$i" prefers "node$i=50"
done
ha_on node1 pcs cluster cib-push "$CIB" >"$HA_DIR/pcs.out" 2>&1 ||
    fail "pcs cluster cib-push: $(cat "$HA_DIR/pcs.out")"
ha_wait 90 "ha1 on node1" ha_running_on ip_ha1 node1
ha_wait 90 "ha2 on node2" ha_running_on ip_ha2 node2
pass "ha1 and its address on node1, ha2 and its address on node2 (active/active)"

url() { echo "nfs://10.99.0.10$1/ha$1/fs?nfsport=2049&mountport=20048&version=${2:-3}"; }
# The writers run for minutes: unpaced, a fast machine fills the 2 GiB pools with
# records (64 KiB each) before the last failover. 20 acknowledged writes a second
# each keep every pool under 1 GiB and still prove each pause.
export CAIRN_HAWRITE_PACE_MS=50
# Not through the ha_client function: $! must be the writer itself (ip netns exec execs it).
ip netns exec "$HA-c" "$CAIRN_BIN/nfs_client" "$(url 1)" hawrite rec >"$HA_DIR/w1.acks" 2>"$HA_DIR/w1.err" &
W1=$!
ip netns exec "$HA-c" "$CAIRN_BIN/nfs_client" "$(url 2)" hawrite rec >"$HA_DIR/w2.acks" 2>"$HA_DIR/w2.err" &
W2=$!
ip netns exec "$HA-c" "$CAIRN_BIN/nfs_client" "$(url 1 4)" hawrite rec4 >"$HA_DIR/v1.acks" 2>"$HA_DIR/v1.err" &
V1=$!
ip netns exec "$HA-c" "$CAIRN_BIN/nfs_client" "$(url 2 4)" hawrite rec4 >"$HA_DIR/v2.acks" 2>"$HA_DIR/v2.err" &
V2=$!
portal() { echo "10.99.0.10$1:3260"; }
iqn() { echo "iqn.2026-12.org.cairn.ha:ha$1"; }
ip netns exec "$HA-c" "$CAIRN_BIN/iscsi_client" hawrite "$(portal 1)" "$(iqn 1)" 1 262144 \
    >"$HA_DIR/i1.acks" 2>"$HA_DIR/i1.err" &
I1=$!
ip netns exec "$HA-c" "$CAIRN_BIN/iscsi_client" hawrite "$(portal 2)" "$(iqn 2)" 2 262144 \
    >"$HA_DIR/i2.acks" 2>"$HA_DIR/i2.err" &
I2=$!
acks_of() { wc -l <"$HA_DIR/$1.acks"; }
acks_past() { [ "$(acks_of "$1")" -ge "$2" ]; }
for w in w1 w2 v1 v2 i1 i2; do ha_wait 90 "the first records acknowledged ($w)" acks_past $w 3; done

now_ms() { date +%s%3N; }
# The longest silence of writer W (seconds) ending after T0 (ms): from its last
# ack before the takeover to its first ack after it.
longest_gap() {
    awk -v t0="$2" '{ if (prev && $2 >= t0 && $2 - prev > gap) gap = $2 - prev; prev = $2 }
                    END { printf "%.3f", gap / 1000 }' "$HA_DIR/$1.acks"
}

# Seconds from T0 (epoch ms) to the first line after T0 in either node's pacemaker
# log that matches PATTERN, or "-" when there is none: the cluster's own steps of a
# takeover, without the clients' time to notice. (Which node logs a step depends on
# which one is the DC.)
pcmk_after() {
    local t0=$1 pattern=$2 line ms first=""
    while IFS= read -r line; do
        ms=$(date -d "${line:0:19}" +%s%3N)
        [ "$ms" -ge "$t0" ] && { [ -z "$first" ] || [ "$ms" -lt "$first" ]; } && first=$ms
    done < <(grep -h -- "$pattern" "$HA_DIR"/node[12]/var/log/pacemaker/pacemaker.log)
    if [ -n "$first" ]; then
        awk -v a="$first" -v b="$t0" 'BEGIN { printf "%.3f", (a - b) / 1000 }'
    else
        echo -
    fi
}

# takeover WHAT NODE CMD...: runs CMD, then waits until ha1 and its address run on
# NODE and ha1's writers have acknowledged more records there; prints the takeover times.
takeover() {
    local what=$1 node=$2; shift 2
    local t0; t0=$(now_ms)
    "$@"
    ha_wait 120 "ha1 on $node after $what" ha_running_on ip_ha1 "$node"
    ha_wait 60 "ha1's pool on $node after $what" ha_running_on pool_ha1 "$node"
    local w n
    for w in w1 v1 i1; do
        n=$(acks_of $w)
        # One more record proves the writer goes on (an NFSv4 record is 32 sync writes).
        ha_wait 120 "writes to ha1 ($w) after $what" acks_past $w $((n + 1))
    done
    kill -0 "$W1" 2>/dev/null || fail "ha1's NFS writer died: $(tail -3 "$HA_DIR/w1.err")"
    kill -0 "$V1" 2>/dev/null || fail "ha1's NFSv4 writer died: $(tail -3 "$HA_DIR/v1.err")"
    kill -0 "$I1" 2>/dev/null || fail "ha1's iSCSI writer died: $(tail -3 "$HA_DIR/i1.err")"
    echo "takeover ($what): NFS $(longest_gap w1 "$t0") s, NFSv4 $(longest_gap v1 "$t0") s," \
        "iSCSI $(longest_gap i1 "$t0") s from the last ack on the old head to the first on $node;" \
        "address up on $node $(pcmk_after "$t0" "Result of start operation for ip_ha1 on $node: ok") s after the event"
    # Where the time went (tools/bench/takeover.sh collects these; "-": no such step).
    echo "timeline ($what): peer lost $(pcmk_after "$t0" "controld.*Node node1 state is now lost") s," \
        "fenced $(pcmk_after "$t0" "Operation 'reboot' targeting node1 by .*OK") s," \
        "address down $(pcmk_after "$t0" "Result of stop operation for ip_ha1 on .*: ok") s," \
        "pool started $(pcmk_after "$t0" "Result of start operation for pool_ha1 on $node: ok") s," \
        "address up $(pcmk_after "$t0" "Result of start operation for ip_ha1 on $node: ok") s"
    pass "$what: ha1 and 10.99.0.101 on $node, writes go on"
}

# node2 stays up all along, so the cluster is driven from there. pcs 0.11 removes the
# move's constraint once the pool runs on NODE; stickiness keeps it there.
move_to() {
    ha_on node2 pcs resource move pool_ha1 "$1" >"$HA_DIR/pcs.out" 2>&1 ||
        fail "pcs resource move pool_ha1 $1: $(cat "$HA_DIR/pcs.out")"
}

takeover "planned move to node2" node2 move_to node2
takeover "planned move back to node1" node1 move_to node1

cairnd_pid_on() {
    local ns; ns=$(readlink "/proc/$(cat "$HA_NODES_DIR/$1.pid")/ns/net")
    local p
    for p in $(pgrep -x cairnd); do
        [ "$(readlink "/proc/$p/ns/net")" = "$ns" ] && echo "$p"
    done
}
kill_cairnd() { kill -9 "$(cairnd_pid_on node1)"; }
[ -n "$(cairnd_pid_on node1)" ] || fail "no cairnd on node1"
takeover "kill -9 of node1's cairnd" node2 kill_cairnd
ha_on node2 crm_resource --cleanup -r pool_ha1 >/dev/null
takeover "planned move back to node1 (cairnd started again by the agent)" node1 move_to node1

takeover "power-off of node1's namespace (fenced)" node2 ha_power_off node1
ha_on node2 stonith_admin --history node1 2>/dev/null | grep -q "successful" ||
    fail "node1 was not fenced: $(ha_on node2 stonith_admin --history node1 2>&1)"
pass "node2 fenced node1 before taking ha1"

# The undisturbed head: ha2 stayed on node2 and its writer never retried.
ha_running_on pool_ha2 node2 || fail "ha2 left node2"
[ ! -s "$HA_DIR/w2.err" ] || fail "ha2's NFS client was disturbed: $(head -3 "$HA_DIR/w2.err")"
[ ! -s "$HA_DIR/v2.err" ] || fail "ha2's NFSv4 client was disturbed: $(head -3 "$HA_DIR/v2.err")"
[ ! -s "$HA_DIR/i2.err" ] || fail "ha2's iSCSI client was disturbed: $(head -3 "$HA_DIR/i2.err")"
pass "ha2's NFSv3, NFSv4 and iSCSI writes on node2 went on without a single retry through every takeover of ha1"
echo "ha1's writers reconnected: NFSv3 $(grep -c '^retry' "$HA_DIR/w1.err") times," \
    "NFSv4 $(grep -c '^retry' "$HA_DIR/v1.err") times, iSCSI $(grep -c '^retry' "$HA_DIR/i1.err") times"

# Nothing acknowledged is lost.
kill "$W1" "$W2" "$V1" "$V2" "$I1" "$I2"
wait "$W1" "$W2" "$V1" "$V2" "$I1" "$I2" 2>/dev/null || true
last_is_count() {
    local n; n=$(acks_of "$1")
    [ "$(tail -1 "$HA_DIR/$1.acks" | cut -d' ' -f1)" -eq $((n - 1)) ] ||
        fail "writer $1's acknowledgements are not consecutive"
    echo "$n"
}
for i in 1 2; do
    n=$(last_is_count w$i)
    ha_client "$CAIRN_BIN/nfs_client" "$(url "$i")" verify rec "$n" >/dev/null ||
        fail "ha$i lost acknowledged NFS records"
    pass "ha$i: all $n acknowledged NFSv3 records read back"
    n=$(last_is_count v$i)
    ha_client "$CAIRN_BIN/nfs_client" "$(url "$i" 4)" verify rec4 "$n" >/dev/null ||
        fail "ha$i lost acknowledged NFSv4 records"
    pass "ha$i: all $n acknowledged NFSv4 records read back"
    n=$(last_is_count i$i)
    ha_client "$CAIRN_BIN/iscsi_client" verify "$(portal "$i")" "$(iqn "$i")" "$i" "$n" ||
        fail "ha$i lost acknowledged iSCSI blocks"
    pass "ha$i: all $n acknowledged iSCSI blocks read back"
done
