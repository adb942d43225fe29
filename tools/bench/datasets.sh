#!/usr/bin/env bash
# Dataset benchmarks (issue 3, "Performance"), Cairn side by side with the local
# file system, in one run on one disk:
#   bench_zpl_meta   create / stat / remove rates of N files in one directory
#                    (empty and FILE_BYTES files, 1 and 4 threads) vs ext4 & co;
#   bench_zpl_seq    1 MiB sequential write + cold read of SIZE on a 2-way mirror
#                    (compression lz4 and off) vs an O_DIRECT plain file;
#   bench_zvol_iops  8 KiB random write / FUA write / read on a volume vs an
#                    O_DIRECT plain file.
# Repetitions are outermost (REPS, default 3); the report gives medians.
# A benchmark, never a test: nothing here passes or fails on a number.
#
# usage: tools/bench/datasets.sh [DIR]        (default /var/tmp/cairn-dsbench)
# environment (defaults):
#   REPS=3  BUILD=build  N=20000  FILE_SIZES="0 4096"  THREADS="1 4"
#   SIZE=2G  COMPS=lz4,off  VOLSIZE_MIB=1024  ZVOL_SECONDS=8  QD=32
#   OUT=DIR/results-<date>   (results.tsv, report.md, run.log are kept there)
set -euo pipefail

DIR=${1:-/var/tmp/cairn-dsbench}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
REPS=${REPS:-3}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$HERE/$BUILD ;; esac
N=${N:-20000}
FILE_SIZES=${FILE_SIZES:-"0 4096"}
THREADS=${THREADS:-"1 4"}
SIZE=${SIZE:-2G}
COMPS=${COMPS:-lz4,off}
VOLSIZE_MIB=${VOLSIZE_MIB:-1024}
ZVOL_SECONDS=${ZVOL_SECONDS:-8}
QD=${QD:-32}
BIN=$BUILD/tools/bench
for b in bench_zpl_meta bench_zpl_seq bench_zvol_iops; do
    [ -x "$BIN/$b" ] || { echo "missing $BIN/$b (make -C $BUILD $b)" >&2; exit 1; }
done

mkdir -p "$DIR"
OUT=${OUT:-$DIR/results-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
SCRATCH=$(mktemp -d "$DIR/scratch.XXXXXX")
cleanup() { rm -rf "$SCRATCH"; }
trap cleanup EXIT INT TERM

TSV=$OUT/results.tsv
LOG=$OUT/run.log
: >"$TSV"
load() { cut -d' ' -f1-3 /proc/loadavg; }
{
    echo "start $(date -u +%FT%TZ) load $(load)"
    echo "host $(nproc) cpus, $(uname -r), fs of $DIR: $(stat -f -c %T "$DIR"), device $(df --output=source "$DIR" | tail -1)"
    echo "REPS=$REPS N=$N FILE_SIZES='$FILE_SIZES' THREADS='$THREADS' SIZE=$SIZE COMPS=$COMPS VOLSIZE_MIB=$VOLSIZE_MIB ZVOL_SECONDS=$ZVOL_SECONDS QD=$QD"
} | tee "$OUT/conditions.txt"

# Runs one bench, logs everything, and appends its RESULT lines (with the rep
# number and, for benches that do not name themselves, bench=NAME) to the TSV.
run() {
    local rep=$1 tag=$2
    shift 2
    echo "== rep $rep: $* (load $(load))" | tee -a "$LOG"
    "$@" 2>&1 | grep -v ' INFO ' | tee -a "$LOG" | sed -n 's/^RESULT //p' |
        while read -r line; do
            case $line in bench=*) ;; *) line="bench=$tag $line" ;; esac
            echo "rep=$rep $line" >>"$TSV"
        done
}

for rep in $(seq 1 "$REPS"); do
    for fb in $FILE_SIZES; do
        for t in $THREADS; do
            sync -f "$SCRATCH"
            run "$rep" meta "$BIN/bench_zpl_meta" -d "$SCRATCH" -n "$N" -s "$fb" -t "$t"
        done
    done
    sync -f "$SCRATCH"
    run "$rep" seq "$BIN/bench_zpl_seq" -d "$SCRATCH" -s "$SIZE" -c "$COMPS"
    sync -f "$SCRATCH"
    run "$rep" zvol "$BIN/bench_zvol_iops" -d "$SCRATCH" -s "$VOLSIZE_MIB" -t "$ZVOL_SECONDS" -q "$QD"
done
echo "end $(date -u +%FT%TZ) load $(load)" | tee -a "$OUT/conditions.txt"

python3 - "$TSV" "$OUT/conditions.txt" >"$OUT/report.md" <<'EOF'
import sys, statistics as st
rows = [dict(kv.split("=", 1) for kv in l.split()) for l in open(sys.argv[1]) if l.strip()]
def med(rs, k): return st.median(float(r[k]) for r in rs)
def group(rs, keys):
    g = {}
    for r in rs: g.setdefault(tuple(r.get(k, "") for k in keys), []).append(r)
    return g
print("Conditions:\n")
for l in open(sys.argv[2]): print("    " + l.rstrip())
print("\nFilesystem metadata (bench_zpl_meta), medians; ops/s include the final zpl_commit / syncfs:\n")
print("| phase | file bytes | threads | Cairn ops/s | plain ops/s | Cairn / plain | Cairn CPU-s/1000 ops | plain CPU-s/1000 ops | reps |")
print("|---|---|---|---|---|---|---|---|---|")
order = {"create": 0, "stat": 1, "remove": 2}
meta = group([r for r in rows if r["bench"] == "meta"], ["file_bytes", "threads", "phase"])
for k in sorted(meta, key=lambda k: (int(k[0]), int(k[1]), order[k[2]])):
    rs = meta[k]; c, p = med(rs, "cairn_ops"), med(rs, "plain_ops")
    ratio = st.median(float(r["cairn_ops"]) / float(r["plain_ops"]) for r in rs)
    print(f"| {k[2]} | {k[0]} | {k[1]} | {c:.0f} | {p:.0f} | {ratio:.2f} | {med(rs,'cairn_cpu_per_kop'):.3f} | {med(rs,'plain_cpu_per_kop'):.3f} | {len(rs)} |")
print("\nFilesystem sequential 1 MiB I/O (bench_zpl_seq), medians; Cairn on a 2-way mirror, plain file O_DIRECT:\n")
print("| target | write MB/s | read MB/s (cold) | write CPU-s/GiB | read CPU-s/GiB | leaf bytes / logical | write raw x | write per-copy x | read x | reps |")
print("|---|---|---|---|---|---|---|---|---|---|")
seq = [r for r in rows if r["bench"] == "seq"]
pl = [r for r in seq if r["target"] == "plain"]
if pl:
    print(f"| plain file | {med(pl,'write_mbs'):.0f} | {med(pl,'read_mbs'):.0f} | {med(pl,'write_cpu_per_gib'):.2f} | {med(pl,'read_cpu_per_gib'):.2f} | 1.000 | - | - | - | {len(pl)} |")
for comp, rs in group([r for r in seq if r["target"] == "cairn"], ["comp"]).items():
    raw = st.median(float(r["write_mbs"]) / float(r["plain_write_mbs"]) for r in rs)
    rd = st.median(float(r["read_mbs"]) / float(r["plain_read_mbs"]) for r in rs)
    print(f"| Cairn compression={comp[0]} | {med(rs,'write_mbs'):.0f} | {med(rs,'read_mbs'):.0f} | {med(rs,'write_cpu_per_gib'):.2f} | {med(rs,'read_cpu_per_gib'):.2f} | {med(rs,'leaf_per_logical'):.3f} | {raw:.2f} | {raw*2:.2f} | {rd:.2f} | {len(rs)} |")
print("\nVolume 8 KiB random I/O (bench_zvol_iops), medians:\n")
print("| phase | zvol IOPS | plain IOPS | zvol / plain | zvol CPU-s/GiB | plain CPU-s/GiB | reps |")
print("|---|---|---|---|---|---|---|")
zv = group([r for r in rows if r["bench"] == "zvol"], ["phase"])
for k in ["randwrite", "randwrite-fua", "randread"]:
    rs = zv.get((k,), [])
    if not rs: continue
    ratio = st.median(float(r["zvol_iops"]) / float(r["file_iops"]) for r in rs)
    print(f"| {k} | {med(rs,'zvol_iops'):.0f} | {med(rs,'file_iops'):.0f} | {ratio:.2f} | {med(rs,'zvol_cpu_per_gib'):.2f} | {med(rs,'file_cpu_per_gib'):.2f} | {len(rs)} |")
EOF
cat "$OUT/report.md"
echo "(kept: $OUT)"
