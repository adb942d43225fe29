#!/usr/bin/env bash
# Warm sequential reads, two Cairn builds and nfs-ganesha side by side in one run:
#
#   tools/bench/nfs-read-ab.sh BASE_BUILD NEW_BUILD OUT      (as root)
#
# Each build's cairnd serves its own pool (24 GiB sparse file, lz4, fletcher4,
# arc_max 3G); ganesha (../shared/peers/peer-ganesha.sh) serves a directory on the
# same disk. The file (GIB GiB, half random, half text) is written once to each
# over v3 and read once, so it is warm (ARC, page cache) and its atime is set;
# then RUNS repetitions, servers alternating inside each, of nfs-cat over v3
# and v4 (one 1 MiB READ in flight). Per read: MiB/s of wall time, the server's
# CPU-s/GiB (utime+stime) and context switches/GiB (voluntary + involuntary,
# summed over its threads). OUT/results.tsv, OUT/report.md (medians),
# OUT/conditions.txt (load). Why: to A/B a read-path change against its base
# and ganesha in the same minute on a shared machine; never pass/fail.
# COLD=1 reads from disk instead: before every read each Cairn pool is exported
# and imported (its ARC is empty; its leaves are O_DIRECT) and the page cache
# dropped (`sync; drop_caches`: ganesha's cache, machine-wide).
# DEPTH=N (N > 1) reads with N READs of 1 MiB in flight (bench_nfs_stream -r of
# NEW_BUILD), as a Linux client's read-ahead keeps several going, instead of
# nfs-cat's one.
# FRESH=1 writes the file again (over v3, nfs-cp) right before every read, so
# each read is the first after the write, as nfs-throughput.sh's "read right
# after the write": Cairn's records are then dirty or freshly synced, unread.
# Environment: GIB (1), RUNS (5), COLD (0), FRESH (0), DEPTH (1), BENCH_DIR (/var/tmp/cairn-nfs-ab).
set -euo pipefail
BASE=$(cd "$1" && pwd); NEW=$(cd "$2" && pwd); OUT=$3; GIB=${GIB:-1}; RUNS=${RUNS:-5}
BENCH_DIR=${BENCH_DIR:-/var/tmp/cairn-nfs-ab}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PEERS=$SRC/../shared/peers
[ -d "$PEERS" ] || PEERS=/work/shared/peers
mkdir -p "$OUT" "$BENCH_DIR"; D=$BENCH_DIR/w
DATA=$BENCH_DIR/data-$GIB.bin
[ -f $DATA ] || python3 - "$DATA" "$GIB" <<'PY'
import os, sys
path, gib = sys.argv[1], int(sys.argv[2])
chunk = os.urandom(1 << 19) + (b"cairn benchmark text line 0123456789\n" * 14170)[: 1 << 19]
with open(path, "wb") as f:
    for _ in range(gib << 10): f.write(chunk)
PY
ticks=$(getconf CLK_TCK)
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
csw_of() { cat /proc/$1/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s+=$2} END {print s}'; }
start_cairn() { # NAME BUILD PORT
    local s=$D/$1; mkdir -p $s; truncate -s 24G $s/pool.img
    cat > $s/c.conf <<C
state_dir = $s
socket = $s/sock
nfs_listen = 127.0.0.1:$3
mount_listen = 127.0.0.1:$(($3+1))
portmap_listen = 127.0.0.1:$(($3+2))
iscsi_listen = 127.0.0.1:$(($3+3))
arc_max = 3G
C
    "$2/cairnd" --config $s/c.conf --foreground 2>$s/log & echo $! > $s/pid
    for _ in $(seq 100); do CAIRN_SOCKET=$s/sock "$2/cairn" pool list >/dev/null 2>&1 && break; sleep 0.1; done
    CAIRN_SOCKET=$s/sock "$2/cairn" pool create t$1 $s/pool.img
    CAIRN_SOCKET=$s/sock "$2/cairn" create -o sharenfs=no_root_squash -o compression=lz4 -o checksum=fletcher4 t$1/b
}
if [ "${INNER:-}" = 1 ]; then
  printf 'server\tproto\trep\tmib_s\tcpu_s_gib\tcsw_gib\tload1\n' > $OUT/results.tsv
  declare -A PID U3 U4
  PID[base]=$(cat $D/base/pid); PID[new]=$(cat $D/new/pid); PID[ganesha]=$PEER_GANESHA_PID
  U3[base]="nfs://127.0.0.1/tbase/b/f?nfsport=$PB&mountport=$((PB+1))&version=3"
  U4[base]="nfs://127.0.0.1/tbase/b/f?nfsport=$PB&version=4"
  U3[new]="nfs://127.0.0.1/tnew/b/f?nfsport=$PN&mountport=$((PN+1))&version=3"
  U4[new]="nfs://127.0.0.1/tnew/b/f?nfsport=$PN&version=4"
  U3[ganesha]="$PEER_NFS3_URL/f?$PEER_NFS3_ARGS"; U4[ganesha]="$PEER_NFS4_URL/f?$PEER_NFS4_ARGS"
  for s in base new ganesha; do nfs-cp $DATA "${U3[$s]}"; done
  for s in base new ganesha; do nfs-cat "${U3[$s]}" >/dev/null; done   # atime, warm-up
  declare -A BIN=([base]=$1 [new]=$2)
  cold() { # SERVER: empty its caches
      if [ $1 != ganesha ]; then
          CAIRN_SOCKET=$D/$1/sock "${BIN[$1]}/cairn" pool export t$1
          CAIRN_SOCKET=$D/$1/sock "${BIN[$1]}/cairn" pool import -d $D/$1 t$1
      fi
      sync; echo 3 > /proc/sys/vm/drop_caches
  }
  for i in $(seq $RUNS); do for s in base new ganesha; do for p in v3 v4; do
      u=${U3[$s]}; [ $p = v4 ] && u=${U4[$s]}
      [ "${COLD:-0}" = 1 ] && cold $s
      if [ "${FRESH:-0}" = 1 ]; then # a new file each time (nfs-cp does not overwrite)
          [ $s = ganesha ] && rm -f "$PEER_EXPORT"/f[0-9]*
          w=${U3[$s]}; nfs-cp $DATA "${w/\/f\?//f$i$p?}" >/dev/null; u=${u/\/f\?//f$i$p?}
      fi
      pid=${PID[$s]}; c0=$(cpu_of $pid); w0=$(csw_of $pid); t0=$(date +%s.%N)
      if [ "${DEPTH:-1}" -gt 1 ]; then
          "$2/tools/bench/bench_nfs_stream" -r "$u" 1048576 "$DEPTH" > /dev/null
      else
          nfs-cat "$u" > /dev/null
      fi
      t1=$(date +%s.%N); c1=$(cpu_of $pid); w1=$(csw_of $pid)
      printf '%s\t%s\t%s\t%.0f\t%.3f\t%.0f\t%s\n' $s $p $i "$(echo "$GIB*1024/($t1-$t0)" | bc -l)" \
        "$(echo "($c1-$c0)/$ticks/$GIB" | bc -l)" "$(echo "($w1-$w0)/$GIB" | bc -l)" "$(cut -d' ' -f1 /proc/loadavg)" >> $OUT/results.tsv
  done; done; done
  exit 0
fi
rm -rf "$D"; mkdir -p "$D"
PB=$((30000 + RANDOM % 10000)); PN=$((PB + 10))
start_cairn base "$BASE" $PB; start_cairn new "$NEW" $PN
trap 'kill $(cat $D/base/pid) $(cat $D/new/pid) 2>/dev/null || true; wait' EXIT
echo "start $(date -u +%FT%TZ) load $(cat /proc/loadavg) cores $(nproc) GIB=$GIB RUNS=$RUNS COLD=${COLD:-0} FRESH=${FRESH:-0} DEPTH=${DEPTH:-1}" > $OUT/conditions.txt
export INNER=1 PB PN OUT GIB RUNS DATA BENCH_DIR COLD FRESH DEPTH
PEER_DIR=$D/ganesha PEER_REUSE_RPCBIND=1 bash "$PEERS/peer-ganesha.sh" -- bash "$0" "$BASE" "$NEW" "$OUT"
echo "end $(date -u +%FT%TZ) load $(cat /proc/loadavg)" >> $OUT/conditions.txt
python3 - $OUT/results.tsv <<'PY' | tee $OUT/report.md
import csv, sys, statistics as st
rows = list(csv.DictReader(open(sys.argv[1]), delimiter='\t'))
print('| proto | server | MiB/s | CPU-s/GiB | ctx switches/GiB | runs |'); print('|---|---|---:|---:|---:|---:|')
for p in ('v3','v4'):
    for s in ('base','new','ganesha'):
        r=[x for x in rows if x['proto']==p and x['server']==s]
        if not r: continue
        m=lambda k: st.median(float(x[k]) for x in r)
        print(f"| {p} | {s} | {m('mib_s'):,.0f} | {m('cpu_s_gib'):.2f} | {m('csw_gib'):,.0f} | {len(r)} |")
l=[float(x['load1']) for x in rows]; print(f"\nload1 during reads: min {min(l)}, median {st.median(l)}, max {max(l)}")
PY
cat $OUT/conditions.txt
