#!/usr/bin/env bash
# Sequential reads after random rewrites (issue 27 goal 4). bench_zvol_fragseq writes a
# volume (volblocksize 8K, arc_max 256 MiB) in sequence, reads it in sequence, rewrites
# 100% and then 200% of it with random 8 KiB writes and reads it in sequence after each;
# every read pass starts with the ARC and the leaf file's page cache empty. It prints per
# pass MB/s and the mean size of the disk reads (leaf bytes read / read operations: how
# well logical neighbours lie together, independent of machine load), and the loss against
# the first pass. DEFRAG=1 also defragments the volume after the rewrites and reads it
# again. DIR must be on a real disk (not tmpfs: its pages cannot be dropped).
# ARC sets arc_max in MiB (default 256: what auto sizing gives a 512 MiB machine, half;
# every read pass starts with the pool's blocks purged, so none is served from memory;
# with 16, as before 2026-12-07, the read-ahead window is held to an eighth of it).
# Usage: [SIZE=MiB] [THREADS=n] [ARC=MiB] [DEFRAG=1] tools/bench/frag-seqread.sh [DIR]
set -euo pipefail
DIR=${1:-/var/tmp}; SIZE=${SIZE:-2048}; THREADS=${THREADS:-8}; BUILD=${BUILD:-build}
args=(-d "$DIR" -s "$SIZE" -q "$THREADS" -a "${ARC:-256}")
[ "${DEFRAG:-0}" = 1 ] && args+=(-D)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores;" \
     "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BUILD/tools/bench/bench_zvol_fragseq" "${args[@]}"
