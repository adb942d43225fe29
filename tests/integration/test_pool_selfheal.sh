#!/usr/bin/env bash
# Self-healing. For a 2-way mirror, a raidz2 and a raidz3: objects are written, then
# random 4 KiB chunks of stored blocks are overwritten on one mirror side / on P raidz
# leaves, and the front labels (first 512 KiB) of one damaged leaf are destroyed.
# Reads must still return the right data (verified before any repair, read-only); the
# pool imports through the CLI; a scrub repairs (bytes repaired > 0, checksum errors
# counted on exactly the damaged leaves); a second scrub repairs nothing; the data
# verifies and `cairn check` passes. Then a leaf file is removed: the pool imports
# DEGRADED with that leaf UNAVAIL and every byte still reads back.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

daemon_start d1
seed=$((RANDOM * 32768 + RANDOM))
echo "seed $seed"

# heal NAME TYPE NLEAVES NDAMAGED COMPRESS
heal() {
    local name=$1 type=$2 nleaves=$3 ndamaged=$4
    local objopts=(--objects 8 --size 3M --compress "$5")
    local dir="$T/$name" pool="heal$name" leaves=() paths=() l i
    for i in $(seq 1 "$nleaves"); do leaves+=("l$i"); paths+=("$dir/l$i"); done
    sparse_files "$dir" 256M "${leaves[@]}"
    run_ok "$CAIRN" pool create "$pool" "$type" "${paths[@]}"
    run_ok "$CAIRN" pool export "$pool"
    objtest write "$dir" "$pool" --seed "$seed" "${objopts[@]}"

    # Damage the last NDAMAGED leaves (the first leaf of a mirror stays whole).
    local damaged=("${paths[@]:$((nleaves - ndamaged))}") n
    for l in "${damaged[@]}"; do
        n=$(corrupt_data "$l" 40 "$((seed + ${#l}))")
        [ "$n" -ge 20 ] || fail "$name: only $n chunks of data found to damage on $l"
    done
    corrupt_front_labels "${damaged[0]}"
    local garbage; garbage=$(head -c 524288 "${damaged[0]}" | cksum)

    # Reads heal around the damage before anything is repaired (read-only import).
    objtest verify "$dir" "$pool" --seed "$seed" "${objopts[@]}"
    pass "$name: damaged pool reads back correctly"

    run_ok "$CAIRN" pool import -d "$dir" "$pool"
    run_ok "$CAIRN" pool scrub "$pool"
    wait_scrub "$pool"
    echo "$name: $(grep 'scan:' "$LAST_STDOUT")"
    local rep; rep=$(scrub_repaired)
    [ -n "$rep" ] && [ "$rep" != 0 ] || fail "$name: first scrub repaired '$rep': $(cat "$LAST_STDOUT")"
    grep -q 'with 0 errors' "$LAST_STDOUT" || fail "$name: scrub found unrepairable blocks: $(cat "$LAST_STDOUT")"
    for l in "${paths[@]}"; do
        local row cks
        row=$(leaf_row "$l")
        cks=$(echo "$row" | cut -d' ' -f4)
        if printf '%s\n' "${damaged[@]}" | grep -qx -- "$l"; then
            [ "$cks" -gt 0 ] || fail "$name: damaged leaf $l shows no checksum errors: $row"
            grep -E "^	 +$l .*\(repaired [0-9.]+[KMG]?\)" "$LAST_STDOUT" >/dev/null \
                || fail "$name: damaged leaf $l shows no repaired bytes: $(cat "$LAST_STDOUT")"
        else
            [ "$row" = "ONLINE 0 0 0" ] || fail "$name: undamaged leaf $l: $row"
        fi
    done
    pass "$name: scrub repaired $rep, errors counted on the damaged leaves"

    run_ok "$CAIRN" pool clear "$pool"
    run_ok "$CAIRN" pool scrub "$pool"
    wait_scrub "$pool"
    [ "$(scrub_repaired)" = 0 ] || fail "$name: second scrub repaired something: $(cat "$LAST_STDOUT")"
    for l in "${paths[@]}"; do
        [ "$(leaf_row "$l")" = "ONLINE 0 0 0" ] || fail "$name: after repair, $l: $(leaf_row "$l")"
    done
    pass "$name: second scrub finds nothing"

    run_ok "$CAIRN" pool export "$pool"
    [ "$(head -c 524288 "${damaged[0]}" | cksum)" != "$garbage" ] \
        || fail "$name: the destroyed front labels of ${damaged[0]} were never rewritten"
    objtest verify "$dir" "$pool" --seed "$seed" "${objopts[@]}"
    check_clean "$pool" "$dir"
    pass "$name: data verifies and check is clean after repair"

    # A leaf file removed: DEGRADED, the leaf UNAVAIL, data still served.
    rm -f "${paths[0]}"
    run_ok "$CAIRN" pool import -d "$dir" "$pool"
    run_ok "$CAIRN" pool status "$pool"
    expect_stdout '^ state: DEGRADED$'
    [ "$(leaf_row "${paths[0]}" | cut -d' ' -f1)" = UNAVAIL ] \
        || fail "$name: removed leaf not UNAVAIL: $(cat "$LAST_STDOUT")"
    run_ok "$CAIRN" pool export "$pool"
    objtest verify "$dir" "$pool" --seed "$seed" "${objopts[@]}"
    check_clean "$pool" "$dir"
    pass "$name: imports DEGRADED without a leaf and serves every byte"

    # raidzP with P >= 2: one leaf missing and P - 1 others damaged is still readable.
    if [ "$ndamaged" -ge 2 ]; then
        for l in "${paths[@]:1:$((ndamaged - 1))}"; do
            n=$(corrupt_data "$l" 40 "$((seed + 7 * ${#l}))")
            [ "$n" -ge 20 ] || fail "$name: only $n chunks of data found to damage on $l"
        done
        objtest verify "$dir" "$pool" --seed "$seed" "${objopts[@]}"
        check_clean "$pool" "$dir"
        pass "$name: one leaf missing and $((ndamaged - 1)) damaged: every byte reads back"
    fi
    rm -rf "$dir"
}

heal mirror mirror 2 1 off
heal raidz2 raidz2 5 2 lz4
heal raidz3 raidz3 6 3 off
daemon_stop
