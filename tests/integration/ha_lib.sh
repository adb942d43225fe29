# A real two-node Pacemaker/Corosync cluster on one machine, for the HA tests
# (bash; source after lib.sh).
#
# Topology: a bridge in namespace $HA-br; nodes node1 and node2 in namespaces
# $HA-n1 and $HA-n2 (10.99.0.1 and .2 on eth0), a client in $HA-c (10.99.0.10).
# Each node is an anchor process (ha/node_init.sh) holding the node's network and
# mount namespaces with private /run, /var/lib/pacemaker, /var/lib/corosync,
# /etc/corosync, /var/log and /dev/shm; corosync (knet over the veth addresses) and
# pacemakerd run inside with `nsenter -t ANCHOR -m -n`. Fencing is
# ha/fence_cairn_netns (kills every process of a node's network namespace), the
# pool agent is conf/ocf/cairn-pool from this tree. Everything is torn down on exit.

HA=cha$$
HA_DIR="$T/ha"
HA_NODES_DIR="$HA_DIR/nodes" # NAME.pid: each node's anchor pid (the fencing agent reads it)
HA_OVERLAY="$HA_DIR/overlay"

# Exits 77 (ctest SKIP) when a kernel facility the cluster needs is missing; a
# missing package is a failure (tools/install-deps installs them).
ha_require() {
    [ "$(id -u)" = 0 ] || { echo "SKIP: needs root for network and mount namespaces"; exit 77; }
    local out
    if ! out=$(ip netns add "$HA-probe" 2>&1); then
        echo "SKIP: cannot create a network namespace: $out"; exit 77
    fi
    if ! out=$(ip -n "$HA-probe" link add br0 type bridge 2>&1 &&
               ip -n "$HA-probe" link add v0 type veth peer name v1 2>&1); then
        ip netns del "$HA-probe"
        echo "SKIP: no bridge or veth devices: $out"; exit 77
    fi
    ip netns del "$HA-probe"
    if ! out=$(unshare -m --propagation private true 2>&1); then
        echo "SKIP: cannot create a mount namespace: $out"; exit 77
    fi
    grep -qw overlay /proc/filesystems || { echo "SKIP: no overlay filesystem"; exit 77; }
    local t
    for t in corosync pacemakerd crm_resource crm_mon cibadmin stonith_admin pcs \
        /usr/lib/ocf/resource.d/heartbeat/IPaddr2 ocf-tester; do
        command -v "$t" >/dev/null || [ -x "$t" ] ||
            fail "$t is missing: run tools/install-deps (pacemaker corosync resource-agents)"
    done
}

ha_node_ns() { echo "$HA-n${1#node}"; }
ha_on() { local n=$1; shift; nsenter -t "$(cat "$HA_NODES_DIR/$n.pid")" -m -n "$@"; }
ha_client() { ip netns exec "$HA-c" "$@"; }

ha_teardown() {
    local ns pid
    for ns in "$HA-n1" "$HA-n2" "$HA-c" "$HA-br"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    done
    sleep 0.3
    for ns in "$HA-n1" "$HA-n2" "$HA-c" "$HA-br"; do ip netns del "$ns" 2>/dev/null || true; done
}

ha_dump_logs() {
    local n
    for n in node1 node2; do
        echo "--- $n: pacemaker.log (last lines)" >&2
        grep -E "error|warning|notice" "$HA_DIR/$n/var/log/pacemaker/pacemaker.log" 2>/dev/null |
            grep -v "High CPU load" |
            tail -n 40 >&2 || true
        echo "--- $n: cairnd.log" >&2
        tail -n 20 "$HA_DIR/$n/run/cairn/cairnd.log" >&2 2>/dev/null || true
    done
}

# Network: a bridge namespace with one veth per node and the client.
ha_network() {
    ip netns add "$HA-br"
    ip -n "$HA-br" link add br0 type bridge
    ip -n "$HA-br" link set br0 up
    local i name addr
    for i in n1:1 n2:2 c:10; do
        name=${i%%:*} addr=${i##*:}
        ip netns add "$HA-$name"
        ip link add "$HA$name" type veth peer name eth0 netns "$HA-$name"
        ip link set "$HA$name" netns "$HA-br"
        ip -n "$HA-br" link set "$HA$name" master br0 up
        ip -n "$HA-$name" addr add "10.99.0.$addr/24" dev eth0
        ip -n "$HA-$name" link set eth0 up
        ip -n "$HA-$name" link set lo up
    done
}

# Corosync's token timeout (ms): how long a silent node takes to be declared lost
# (then consensus, 1.2 times as long, before the new membership). The test uses
# what docs/ha.md recommends for a pair of heads; HA_TOKEN_MS=3000 gives Corosync's
# own default (tools/bench/takeover.sh measures both).
: "${HA_TOKEN_MS:=2000}"

ha_corosync_conf() {
    cat <<EOF
totem {
  version: 2
  cluster_name: cairnha
  transport: knet
  crypto_cipher: none
  crypto_hash: none
  token: $HA_TOKEN_MS
}
nodelist {
  node {
    ring0_addr: 10.99.0.1
    name: node1
    nodeid: 1
  }
  node {
    ring0_addr: 10.99.0.2
    name: node2
    nodeid: 2
  }
}
quorum {
  provider: corosync_votequorum
  two_node: 1
}
logging {
  to_logfile: yes
  logfile: /var/log/corosync/corosync.log
  to_stderr: no
  to_syslog: no
  timestamp: on
}
EOF
}

# Starts both nodes: anchors, corosync, pacemakerd; waits until both are online.
ha_start_nodes() {
    mkdir -p "$HA_NODES_DIR" "$HA_OVERLAY/sbin" "$HA_OVERLAY/ocf/cairn"
    cp "$CAIRN_SRC/tests/integration/ha/fence_cairn_netns" "$HA_OVERLAY/sbin/"
    cp "$CAIRN_SRC/conf/ocf/cairn-pool" "$HA_OVERLAY/ocf/cairn/"
    local n i
    for i in 1 2; do
        n=node$i
        mkdir -p "$HA_DIR/$n"
        ip netns exec "$HA-n$i" unshare -m --propagation private \
            "$CAIRN_SRC/tests/integration/ha/node_init.sh" "$HA_DIR/$n" "$HA_OVERLAY" \
            >"$HA_DIR/$n.init.log" 2>&1 &
        echo $! >"$HA_NODES_DIR/$n.pid"
        disown # killed on purpose; no "Killed" line from bash
    done
    for i in 1 2; do
        n=node$i
        for _ in $(seq 1 100); do [ -e "$HA_DIR/$n/ready" ] && break; sleep 0.1; done
        [ -e "$HA_DIR/$n/ready" ] || fail "$n did not come up: $(cat "$HA_DIR/$n.init.log")"
        # ip netns exec and unshare exec into the anchor, so $! is its pid.
        [ "$(readlink "/proc/$(cat "$HA_NODES_DIR/$n.pid")/ns/net")" = \
          "$(ip netns exec "$HA-n$i" readlink /proc/self/ns/net)" ] || fail "$n: anchor pid is wrong"
        ha_corosync_conf >"$HA_DIR/$n/etc/corosync/corosync.conf"
        ha_on "$n" corosync || fail "corosync on $n: $(tail -5 "$HA_DIR/$n/var/log/corosync/corosync.log")"
        ha_on "$n" setsid pacemakerd </dev/null >"$HA_DIR/$n.pacemakerd.log" 2>&1 &
        disown
    done
    ha_wait 120 "both nodes online" ha_both_online
}

ha_both_online() {
    ha_on node1 crm_mon -1 2>/dev/null | grep -q "Online: \[ node1 node2 \]" &&
        ha_on node1 crm_mon -1 2>/dev/null | grep -q "Current DC: node"
}

# ha_wait SECS WHAT CMD...: polls CMD every 0.2 s; fails naming WHAT after SECS.
ha_wait() {
    local secs=$1 what=$2; shift 2
    local end=$((SECONDS + secs))
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || fail "timed out after ${secs}s waiting for $what"
        sleep 0.2
    done
}

# The node a resource runs on (empty when stopped).
ha_where() {
    local n
    for n in node1 node2; do
        [ -e "$HA_DIR/$n/ready" ] && kill -0 "$(cat "$HA_NODES_DIR/$n.pid")" 2>/dev/null || continue
        ha_on "$n" crm_resource --locate -r "$1" 2>/dev/null | sed -n 's/.* is running on: \([a-z0-9]*\).*/\1/p' | head -1
        return 0
    done
}

ha_running_on() { [ "$(ha_where "$1")" = "$2" ]; }

# Kills every process of NODE's network namespace (what a power cut does to it).
ha_power_off() {
    local pid
    for pid in $(ip netns pids "$(ha_node_ns "$1")"); do kill -9 "$pid" 2>/dev/null || true; done
}
