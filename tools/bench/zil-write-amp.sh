#!/usr/bin/env bash
# zil-write-amp.sh: bytes written to the leaves per byte acknowledged, for NFS
# writes made durable by COMMIT and under sync=always (issue 24, "data written twice").
#
#   tools/bench/zil-write-amp.sh [DIR]    DIR: scratch directory (default
#                                          /var/tmp/cairn-bench-wamp)
# Knobs (environment): MIB=1024 per run, WKIB=1024 per NFS WRITE (libnfs sends up
#   to 1 MiB), CMIB="16" MiB between COMMITs (a list: one row each), REPS=1,
#   BUILD=./build (cairnd and cairn), CLIENT=$BUILD/nfs_client.
#
# One cairnd, one pool: a two-way mirror of sparse files in DIR, no log device,
# txg_timeout=5. Each run writes a new file of MIB MiB through tests/tools/nfs_client
# (NFSv3, libnfs) into a fresh dataset (recordsize 128K, compression off):
#   unstable  sync=standard: UNSTABLE writes, a COMMIT every CMIB MiB and at the end
#   always    sync=always: the same client, every WRITE is durable when answered
# `cairn pool iostat -v -H -p POOL 1` runs meanwhile; the leaf rows' WRITE_BW of
# every report after the first (each the bytes of one interval per second of it) are
# summed, from before the first WRITE until the last txg has synced (txg_timeout +
# 2 s after the client is done). Ratio = leaf bytes / acknowledged bytes: a mirror
# that writes the data once is 2.0 plus metadata; the intent log's copies add to it.
# A benchmark, not a test.
set -u
DIR=${1:-/var/tmp/cairn-bench-wamp}
MIB=${MIB:-1024}
WKIB=${WKIB:-1024}
CMIB=${CMIB:-16}
REPS=${REPS:-1}
BUILD=${BUILD:-$(dirname "$0")/../../build}
CLIENT=${CLIENT:-$BUILD/nfs_client}
for b in "$BUILD/cairnd" "$BUILD/cairn" "$CLIENT"; do
    [ -x "$b" ] || { echo "build first: $b not found" >&2; exit 1; }
done
rm -rf "$DIR"
mkdir -p "$DIR"
size=$(( (MIB * 3 + 2048) ))M
truncate -s "$size" "$DIR/a" "$DIR/b"
P=$((30000 + RANDOM % 20000))
cat >"$DIR/cairnd.conf" <<EOF
state_dir = $DIR/state
socket = $DIR/cairnd.sock
nfs_listen = 127.0.0.1:$P
mount_listen = 127.0.0.1:$((P + 1))
portmap_listen = 127.0.0.1:$((P + 2))
iscsi_listen = 127.0.0.1:$((P + 3))
EOF
mkdir -p "$DIR/state"
export CAIRN_SOCKET=$DIR/cairnd.sock
"$BUILD/cairnd" --config "$DIR/cairnd.conf" --foreground 2>"$DIR/cairnd.log" &
CPID=$!
SPID=
trap 'kill $CPID $SPID 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do "$BUILD/cairn" pool list >/dev/null 2>&1 && break; sleep 0.1; done
"$BUILD/cairn" pool create -o txg_timeout=5 wamp mirror "$DIR/a" "$DIR/b" || exit 1
URL_ARGS="nfsport=$P&mountport=$((P + 1))&version=3"

# leaf_bytes FILE: the sum of the leaves' WRITE_BW over every report but the first.
leaf_bytes() {
    awk -F'\t' '$1 == "wamp" { rep++ } rep > 1 && $1 ~ /^\// { s += $8 } END { printf "%.0f\n", s }' "$1"
}

run() {
    local mode=$1 cmib=$2 rep=$3 ds=wamp/m$RANDOM
    local sync=standard
    [ "$mode" = always ] && sync=always
    "$BUILD/cairn" create -o sharenfs=no_root_squash -o compression=off -o recordsize=128K \
        -o sync="$sync" "$ds" || exit 1
    sleep 7 # the create's txg
    "$BUILD/cairn" pool iostat -v -H -p wamp 1 >"$DIR/iostat.$mode" 2>/dev/null &
    SPID=$!
    sleep 1.5
    local t0 acked t1
    t0=$(date +%s.%N)
    acked=$("$CLIENT" "nfs://127.0.0.1/$ds?$URL_ARGS" stream f "$MIB" "$WKIB" "$cmib") || exit 1
    t1=$(date +%s.%N)
    sleep 7 # the last txg
    kill "$SPID"; wait "$SPID" 2>/dev/null; SPID=
    local leaves
    leaves=$(leaf_bytes "$DIR/iostat.$mode")
    printf '%s\t%s\t%s\t%s\t%s\t%.1f\n' "$mode" "$cmib" "$rep" "$acked" "$leaves" \
        "$(awk -v a="$acked" -v b="$t0" -v c="$t1" 'BEGIN{print a / 1048576 / (c - b)}')"
    "$BUILD/cairn" destroy "$ds" >/dev/null || exit 1
}

echo "# $(date -u +%FT%TZ) $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; MIB=$MIB WKIB=$WKIB"
printf 'mode\tcommit_mib\trep\tacked_bytes\tleaf_bytes\tclient_mib_s\n' >"$DIR/results.tsv"
for rep in $(seq 1 "$REPS"); do
    for c in $CMIB; do run unstable "$c" "$rep" >>"$DIR/results.tsv"; done
    run always 0 "$rep" >>"$DIR/results.tsv"
done
kill "$CPID"; wait "$CPID" 2>/dev/null; trap - EXIT
echo "| mode | COMMIT every | acknowledged | written to the leaves | leaves / acknowledged | client MiB/s |"
echo "|---|---:|---:|---:|---:|---:|"
awk -F'\t' 'NR > 1 {
    printf "| %s | %s | %.2f GiB | %.2f GiB | %.2f | %s |\n", $1 == "always" ? "sync=always" : "UNSTABLE+COMMIT",
        $1 == "always" ? "-" : $2 " MiB", $4 / 2^30, $5 / 2^30, $5 / $4, $6 }' "$DIR/results.tsv"
rm -f "$DIR/a" "$DIR/b"
