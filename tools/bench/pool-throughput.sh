#!/usr/bin/env bash
# pool-throughput.sh: Cairn's sequential pool throughput, side by side in one run with
# (a) fio writing the same number of leaf files directly (the device limit) and
# (c) zfs-fuse on the same layout (the userspace ZFS we compare with).
#
#   tools/bench/pool-throughput.sh [DIR]        DIR: scratch dir on the disk under test
#                                                (default /var/tmp/cairn-bench)
# Knobs (environment):
#   SIZE=1G          logical bytes written and read per run (the issue's full size is 4G)
#   REPS=3           repetitions; the report shows medians
#   LAYOUTS="mirror raidz2"   (mirror = 2-way, raidz2 = 6 leaves)
#   RECORDS="128k 1m"  COMPS="off lz4 lzjb gzip-2"  THREADS=1 (writer/reader threads)
#   ZFS_FUSE=1       0 skips zfs-fuse;  ZF_COMPS="off lzjb gzip-2" (zfs-fuse 0.7 has no lz4,
#                    and its largest record is 128K)
#   FIO=1            0 skips the device-limit runs
#   BUILD=/work/main/build   where tools/bench/bench_dmu_pool was built
#   OUT=DIR/results-<date>   raw results (results.tsv) and the report (report.md)
#
# Every run writes into fresh sparse files, as the pool does. fio uses O_DIRECT,
# io_uring, 1 MiB writes, iodepth 8, one job per leaf file, each writing what the pool
# would put on one leaf (mirror: SIZE per leaf; raidz2 of 6: SIZE/4 per leaf), so its
# aggregate MB/s is the rate at which this disk absorbs every copy the pool writes.
# zfs-fuse is driven through ../shared/peers/peer-zfsfuse.sh; for raidz2 (which that
# script does not offer) a private copy with a raidz2 layout added is used.
# The data is semi-compressible in both tools (bench_dmu_pool: 50% random / 50% repeated;
# fio: buffer_compress_percentage=50 with refill_buffers).
# A benchmark, not a test: nothing here passes or fails on a timing.
set -u

DIR=${1:-/var/tmp/cairn-bench}
SIZE=${SIZE:-1G}
REPS=${REPS:-3}
LAYOUTS=${LAYOUTS:-mirror raidz2}
RECORDS=${RECORDS:-128k 1m}
COMPS=${COMPS:-off lz4 lzjb gzip-2}
THREADS=${THREADS:-1}
ZFS_FUSE=${ZFS_FUSE:-1}
ZF_COMPS=${ZF_COMPS:-off lzjb gzip-2}
FIO=${FIO:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BENCH=$BUILD/tools/bench/bench_dmu_pool
PEER=${PEER:-$ROOT/../shared/peers/peer-zfsfuse.sh}
OUT=${OUT:-$DIR/results-$(date +%Y%m%d-%H%M%S)}

say() { echo "pool-throughput: $*" >&2; }
die() { say "$*"; exit 2; }

[ -x "$BENCH" ] || die "$BENCH not built (cmake --build $BUILD --target bench_dmu_pool)"
command -v python3 >/dev/null || die "python3 needed for the report"
mkdir -p "$DIR" "$OUT" || die "cannot create $DIR / $OUT"
SIZE_B=$(numfmt --from=iec "$SIZE") || die "bad SIZE=$SIZE"
RES=$OUT/results.tsv
printf 'kind\tlayout\trecord\tcompress\trep\twrite_mbps\tread_mbps\twrite_cpu_per_gib\tread_cpu_per_gib\twrite_cores\tphys_ratio\n' >"$RES"

nleaves() { case $1 in mirror) echo 2 ;; raidz2) echo 6 ;; raidz1) echo 3 ;; single) echo 1 ;; esac; }
# bytes one leaf receives for SIZE logical bytes, uncompressed
per_leaf() { case $1 in mirror) echo "$SIZE_B" ;; raidz2) echo $((SIZE_B / 4)) ;;
  raidz1) echo $((SIZE_B / 2)) ;; single) echo "$SIZE_B" ;; esac; }
# leaf file size: what it receives plus slack for metadata, labels and allocator spread
leaf_size() { echo $(( ($(per_leaf "$1") * 5 / 4 + 512 * 1024 * 1024) / 1048576 * 1048576 )); }

# ---- machine description -------------------------------------------------------------
{
  echo "date: $(date -u +%FT%TZ)"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "memory: $(free -g | awk '/Mem:/{print $2" GiB"}')"
  echo "dir: $DIR on $(df -P "$DIR" | awk 'NR==2{print $1}') ($(findmnt -no FSTYPE -T "$DIR"))"
  echo "kernel: $(uname -r)"
  echo "size: $SIZE per run, reps: $REPS, threads: $THREADS"
  echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt" >&2

# ---- (a) fio on the leaf files: the device limit --------------------------------------
run_fio() {  # layout rep
  local layout=$1 rep=$2 n per ls i args=() wj rj
  n=$(nleaves "$layout"); per=$(per_leaf "$layout"); ls=$(leaf_size "$layout")
  mkdir -p "$DIR/fio"
  for ((i = 0; i < n; i++)); do
    rm -f "$DIR/fio/leaf$i"; truncate -s "$ls" "$DIR/fio/leaf$i"
    args+=(--name="leaf$i" --filename="$DIR/fio/leaf$i")
  done
  local common=(--direct=1 --ioengine=io_uring --bs=1M --iodepth=8 --size="$per"
                --fallocate=none --group_reporting --output-format=json)
  wj=$(fio "${common[@]}" --rw=write --end_fsync=1 "${args[@]}" 2>/dev/null)
  python3 -c 'import os,sys; [os.posix_fadvise(os.open(f,os.O_RDONLY),0,0,os.POSIX_FADV_DONTNEED) for f in sys.argv[1:]]' "$DIR"/fio/leaf*
  rj=$(fio "${common[@]}" --rw=read "${args[@]}" 2>/dev/null)
  rm -f "$DIR"/fio/leaf*
  python3 - "$layout" "$rep" "$wj" "$rj" >>"$RES" <<'EOF'
import json, sys
layout, rep, wj, rj = sys.argv[1:5]
w = json.loads(wj)["jobs"][0]; r = json.loads(rj)["jobs"][0]
print("\t".join(["fio", layout, "1m", "-", rep, "%.1f" % (w["write"]["bw_bytes"] / 1e6),
                 "%.1f" % (r["read"]["bw_bytes"] / 1e6), "-", "-", "-", "1"]))
EOF
  say "fio $layout rep $rep: $(tail -n1 "$RES" | cut -f6,7)"
}

# ---- (b) Cairn ---------------------------------------------------------------------------
run_cairn() {  # layout record comp rep
  local layout=$1 rec=$2 comp=$3 rep=$4 out line
  out=$("$BENCH" -s "$SIZE" -t "$THREADS" -r "$rec" -c "$comp" "$layout" "$DIR" \
        "$(leaf_size "$layout")" 2>"$OUT/cairn-last.err") || {
    say "bench_dmu_pool $layout $rec $comp failed: $(tail -n2 "$OUT/cairn-last.err")"; return; }
  echo "$out" >>"$OUT/cairn.log"
  line=$(echo "$out" | grep '^RESULT ')
  python3 - "$rep" "$rec" "$line" >>"$RES" <<'EOF'
import sys
rep, rec, line = sys.argv[1:4]
kv = dict(f.split("=", 1) for f in line.split()[1:])
print("\t".join(["cairn", kv["layout"], rec, kv["compress"], rep, kv["write_mbps"],
                 kv["read_mbps"], kv["write_cpu_per_gib"], kv["read_cpu_per_gib"],
                 kv["write_cores"], kv["phys_ratio"]]))
EOF
  say "cairn $layout $rec $comp rep $rep: $(tail -n1 "$RES" | cut -f6-11)"
}

# ---- (c) zfs-fuse --------------------------------------------------------------------------
ZF_OK=0
if [ "$ZFS_FUSE" = 1 ]; then
  if ! command -v zfs-fuse >/dev/null; then
    say "zfs-fuse missing: trying apt-get install -y zfs-fuse"
    apt-get install -y zfs-fuse >/dev/null 2>&1 || say "apt-get install zfs-fuse failed"
  fi
  if ! command -v zfs-fuse >/dev/null; then say "zfs-fuse not installed: skipping it"
  elif [ ! -c /dev/fuse ]; then say "/dev/fuse missing: zfs-fuse cannot run here; skipping it"
  elif [ ! -x "$PEER" ]; then say "$PEER not found: skipping zfs-fuse"
  else ZF_OK=1; fi
fi
PEER_RZ2=$OUT/peer-zfsfuse-raidz2.sh
if [ "$ZF_OK" = 1 ]; then
  # The shared peer script knows mirror, raidz1 and single; add raidz2 (6 files) in a copy.
  sed 's/^  raidz1|raidz) N=3; VSPEC=raidz1 ;;$/&\n  raidz2) N=6; VSPEC=raidz2 ;;/' "$PEER" >"$PEER_RZ2"
  chmod +x "$PEER_RZ2"
fi

run_zfsfuse() {  # layout comp rep
  local layout=$1 comp=$2 rep=$3 script=$PEER
  [ "$layout" = raidz2 ] && script=$PEER_RZ2
  local zdir=$DIR/zf log=$OUT/zfsfuse-$layout-$comp-$rep.log
  ZF_DIR=$zdir ZF_POOL=cbench ZF_LAYOUT=$layout ZF_SIZE=$(leaf_size "$layout") \
  ZF_PROPS="compression=$comp recordsize=128k" ZF_TIMEOUT=900 \
    "$script" bash -c '
      ticks() { awk "{print \$14 + \$15}" /proc/$ZF_PID/stat; }
      f="--name=zf --filename=$MNT/f --bs=1M --size='"$SIZE_B"' --output-format=json"
      t0=$(ticks); n0=$(date +%s%N)
      fio $f --rw=write --end_fsync=1 --buffer_compress_percentage=50 --refill_buffers >"$1.w"
      t1=$(ticks); n1=$(date +%s%N)
      python3 -c "import os,sys; [os.posix_fadvise(os.open(p,os.O_RDONLY),0,0,os.POSIX_FADV_DONTNEED) for p in sys.argv[1:]]" '"$zdir"'/d*
      t2=$(ticks); n2=$(date +%s%N)
      fio $f --rw=read >"$1.r"
      t3=$(ticks); n3=$(date +%s%N)
      echo "$((t1 - t0)) $((t3 - t2)) $((n1 - n0)) $((n3 - n2))" >"$1.cpu"' _ "$OUT/zf" >"$log" 2>&1 || {
    say "zfs-fuse $layout $comp rep $rep failed: $(tail -n3 "$log" | tr '\n' ' ')"; return; }
  python3 - "$layout" "$comp" "$rep" "$OUT/zf" "$SIZE_B" "$(getconf CLK_TCK)" >>"$RES" <<'EOF'
import json, sys
layout, comp, rep, base, size, hz = sys.argv[1:7]
# MB/s from wall time around each fio (the write's includes its final fsync)
c = open(base + ".cpu").read().split()
tw, tr = int(c[0]) / int(hz), int(c[1]) / int(hz)
sw, sr = int(c[2]) / 1e9, int(c[3]) / 1e9
gib = int(size) / 2**30
print("\t".join(["zfsfuse", layout, "128k", comp, rep, "%.1f" % (int(size) / 1e6 / sw),
                 "%.1f" % (int(size) / 1e6 / sr), "%.3f" % (tw / gib), "%.3f" % (tr / gib),
                 "%.2f" % (tw / sw), "-"]))
EOF
  say "zfs-fuse $layout $comp rep $rep: $(tail -n1 "$RES" | cut -f6-10)"
}

# ---- the run: reps outermost, so slow drift of the disk hits every variant alike -------
t_start=$SECONDS
for ((rep = 1; rep <= REPS; rep++)); do
  for layout in $LAYOUTS; do
    [ "$FIO" = 1 ] && run_fio "$layout" "$rep"
    for rec in $RECORDS; do
      for comp in $COMPS; do run_cairn "$layout" "$rec" "$comp" "$rep"; done
    done
    if [ "$ZF_OK" = 1 ]; then
      for comp in $ZF_COMPS; do run_zfsfuse "$layout" "$comp" "$rep"; done
    fi
  done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
echo "wall time: $((SECONDS - t_start)) s" >>"$OUT/machine.txt"
python3 "$HERE/pool-throughput-report.py" "$OUT" | tee "$OUT/report.md"
say "raw results in $RES, report in $OUT/report.md"
