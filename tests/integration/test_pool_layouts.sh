#!/usr/bin/env bash
# Every pool layout end to end: single disk, 2- and 3-way mirror, raidz1/2/3 and two
# top-level mirrors are created from sparse files through the CLI and exported; objects
# with patterned data (holes, a partial last record, records past 4 GiB, overwrites in a
# later txg; a different compression and record size per layout) are written in process
# by cairn_objtest; the pool is imported through the CLI and exported again; then every
# byte is re-derived and compared, and the offline `cairn check` must find the pool clean.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

daemon_start d1

# name | vdev words (leaf names a..f are files in $T/NAME) | objtest options
layouts=(
    "single|a|--compress lz4 --recordsize 128K --size 1500000"
    "mirror2|mirror a b|--compress off --recordsize 64K"
    "mirror3|mirror a b c|--compress gzip-2 --recordsize 128K"
    "raidz1|raidz1 a b c|--compress lzjb --recordsize 32K --size 1000001"
    "raidz2|raidz2 a b c d e|--compress zle --recordsize 128K"
    "raidz3|raidz3 a b c d e f|--compress lz4 --recordsize 1M --size 3M"
    "twomirrors|mirror a b mirror c d|--compress off --recordsize 16K"
)
seed=$((RANDOM * 32768 + RANDOM))
echo "seed $seed"
i=0
for l in "${layouts[@]}"; do
    IFS='|' read -r name words opts <<<"$l"
    i=$((i + 1))
    dir="$T/$name"
    leaves=()
    for w in $words; do
        case $w in mirror|raidz1|raidz2|raidz3) ;; *) leaves+=("$w") ;; esac
    done
    sparse_files "$dir" 256M "${leaves[@]}"
    vdevs=()
    for w in $words; do
        case $w in mirror|raidz1|raidz2|raidz3) vdevs+=("$w") ;; *) vdevs+=("$dir/$w") ;; esac
    done
    pool="lay$i"
    run_ok "$CAIRN" pool create "$pool" "${vdevs[@]}"
    run_ok "$CAIRN" pool status "$pool"
    expect_stdout '^ state: ONLINE$'
    run_ok "$CAIRN" pool export "$pool"

    # shellcheck disable=SC2086
    objtest write "$dir" "$pool" --seed $((seed + i)) --objects 6 $opts
    echo "$name: $(cat "$LAST_STDOUT")"

    run_ok "$CAIRN" pool import -d "$dir" "$pool"
    run_ok "$CAIRN" pool list -H -p "$pool"
    alloc=$(cut -f3 "$LAST_STDOUT")
    [ "$alloc" -gt $((2 * 1024 * 1024)) ] || fail "$name: only $alloc bytes allocated after writing"
    run_ok "$CAIRN" pool status "$pool"
    expect_stdout '^ state: ONLINE$'
    for leaf in "${leaves[@]}"; do
        [ "$(leaf_row "$dir/$leaf")" = "ONLINE 0 0 0" ] || fail "$name: leaf $leaf: $(leaf_row "$dir/$leaf")"
    done
    run_ok "$CAIRN" pool export "$pool"

    # shellcheck disable=SC2086
    objtest verify "$dir" "$pool" --seed $((seed + i)) --objects 6 $opts
    echo "$name: $(cat "$LAST_STDOUT")"
    # The wrong seed must not verify: the check bites.
    # shellcheck disable=SC2086
    if "$OBJTEST" verify -d "$dir" "$pool" --seed $((seed + i + 1000)) --objects 6 $opts \
        >"$LAST_STDOUT" 2>&1; then
        fail "$name: verify with a wrong seed passed"
    fi
    check_clean "$pool" "$dir"
    for leaf in "${leaves[@]}"; do
        # Every leaf holds data: mirrors copy, raidz spreads columns, the pool stripes.
        b=$(data_area_bytes "$dir/$leaf")
        [ "$b" -gt 0 ] || fail "$name: leaf $leaf holds no data"
    done
    pass "$name: create, write, import, export, verify, check"
    rm -rf "$dir"
done
daemon_stop
