#!/usr/bin/env bash
# Cached reads (issue 6): ARC hits against memcpy, L2ARC reads against the cache
# device's own read rate. bench_arc_read fills a cache file through the L2ARC and reads
# it back with the file's page cache dropped before each timed pass (it prints how much
# stayed resident: should be ~0%); fio then reads the same file, 128 KiB psync reads:
# O_DIRECT (the device itself, what the L2ARC is compared with) and buffered from a cold
# page cache (what buffered reads with the kernel's read-ahead get from that device, as
# the L2ARC's pread does). DIR must be on a real disk, not tmpfs (its pages cannot be
# dropped) and not shared with a busy job. Usage: tools/bench/arc-read.sh [DIR] [SIZE_MB]
set -euo pipefail
DIR=${1:-/var/tmp}; SIZE=${2:-256}; BUILD=${BUILD:-build}
F="$DIR/arc-read-l2.$$"
trap 'rm -f "$F"' EXIT
"$BUILD/tools/bench/bench_arc_read" "$DIR" "$SIZE" 3 "$F"
for mode in direct buffered; do
    d=0 note=''
    if [ $mode = direct ]; then d=1; else note=', cold page cache'; fi
    r=()
    for _ in 1 2 3; do
        # --invalidate=1: the file's page cache is dropped before each run.
        r+=("$(fio --name=r --filename="$F" --size="${SIZE}M" --rw=read --bs=128k --direct=$d \
            --invalidate=1 --ioengine=psync --output-format=terse --terse-version=3 |
            awk -F';' '{print $7/1000}')")
    done
    printf 'fio-%-8s %10.0f MB/s (median of 3, 128 KiB reads of the L2ARC'"'"'s cache file%s)\n' \
        "$mode" "$(printf '%s\n' "${r[@]}" | sort -n | sed -n 2p)" "$note"
done
