#!/usr/bin/env bash
# Cached reads (issue 6): ARC hits against memcpy, L2ARC reads against the cache
# file's own read rate (fio, same file size, 128 KiB reads, buffered like the L2ARC's
# pread and O_DIRECT for the device itself). Usage: tools/bench/arc-read.sh [DIR] [SIZE_MB]
set -euo pipefail
DIR=${1:-/var/tmp}; SIZE=${2:-256}; BUILD=${BUILD:-build}
"$BUILD/tools/bench/bench_arc_read" "$DIR" "$SIZE" 3
F="$DIR/arc-read-fio.$$"
trap 'rm -f "$F"' EXIT
fio --name=w --filename="$F" --size="${SIZE}M" --rw=write --bs=1M --end_fsync=1 >/dev/null
for mode in buffered direct; do
    d=0; [ $mode = direct ] && d=1
    r=()
    for i in 1 2 3; do
        r+=("$(fio --name=r --filename="$F" --size="${SIZE}M" --rw=read --bs=128k --direct=$d \
            --ioengine=psync --output-format=terse --terse-version=3 | awk -F';' '{print $7/1000}')")
    done
    printf 'fio-%-8s %10.0f MB/s (median of 3, 128 KiB reads of the cache file)\n' "$mode" \
        "$(printf '%s\n' "${r[@]}" | sort -n | sed -n 2p)"
done
