#!/bin/bash
# node_init.sh DIR OVERLAY: becomes one node of the test cluster. Run as
#   ip netns exec NS unshare -m --propagation private node_init.sh DIR OVERLAY
# so it already has the node's network namespace and a mount namespace of its own.
# Gives the node private copies of the directories Pacemaker and Corosync keep
# state, sockets and logs in (bind mounts of DIR/...), a private /dev/shm (libqb's
# IPC buffers), and overlays OVERLAY/sbin over /usr/sbin (the test's fencing agent)
# and OVERLAY/ocf over /usr/lib/ocf/resource.d (ocf:cairn:cairn-pool from the source
# tree), without writing to the machine's own /usr. Then writes DIR/ready and
# sleeps; its pid is the node's anchor: `nsenter -t PID -m -n` runs a command on
# the node, and killing every process of its network namespace powers it off.
set -euo pipefail
D=$1 O=$2
for d in run var/lib/pacemaker var/lib/corosync etc/corosync var/log/pacemaker var/log/corosync; do
    mkdir -p "$D/$d"
done
cp -a /var/lib/pacemaker/. "$D/var/lib/pacemaker/"
rm -rf "$D/var/lib/pacemaker/cib/"* # a node starts with an empty CIB
chown -R hacluster:haclient "$D/var/lib/pacemaker" "$D/var/log/pacemaker"
for d in run var/lib/pacemaker var/lib/corosync etc/corosync var/log; do
    mount --bind "$D/$d" "/$d"
done
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t overlay overlay -o "lowerdir=$O/sbin:/usr/sbin" /usr/sbin
mount -t overlay overlay -o "lowerdir=$O/ocf:/usr/lib/ocf/resource.d" /usr/lib/ocf/resource.d
echo ready >"$D/ready"
exec sleep infinity
