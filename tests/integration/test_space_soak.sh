#!/usr/bin/env bash
# Space as an administrator reads it, soaked: over NFS, files are written until the
# server refuses, removed, snapshotted and written again, and after every step `used`,
# `referenced`, `usedbysnapshots`, every snapshot's `used` and `available` are checked
# against a model of which files each head and snapshot holds (zfs(8)'s definitions:
# a snapshot leaves `used` as it was; a removed file a snapshot holds moves to
# usedbysnapshots). compressratio of a dataset of a few tiny files is 1.00x. A quota
# counts snapshots; a full pool takes writes again right after its files are removed,
# and holds as much as it did the first time.
# CAIRN_TEST_SEED picks the random steps.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

MIB=1048576
seed=${CAIRN_TEST_SEED:-$(( $(date +%s) % 100000 ))}
echo "test_space_soak: seed $seed (CAIRN_TEST_SEED)"
RANDOM=$seed

sparse_files "$T/dev" 640M a
nfs_daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/soak
URL=$(nfs_url /tank/soak)

# Model: the size of every file ever written (bytes), which are live, and which files
# each snapshot holds (space separated).
declare -A SIZE LIVE SNAP
SNAPS=()
seq_no=0

getp() { "$CAIRN" get -Hp -o value "$1" "$2"; }

# near GOT WANT: within 2 MiB + 2% (metadata: dnodes, indirect blocks, directories).
near() {
    local got=$1 want=$2
    local slack=$((2 * MIB + want / 50))
    [ "$got" -ge $((want - slack)) ] && [ "$got" -le $((want + slack)) ]
}

model_numbers() {
    local f s held ref=0 snaponly=0
    for f in "${!SIZE[@]}"; do
        held=0
        for s in "${SNAPS[@]}"; do
            case " ${SNAP[$s]} " in *" $f "*) held=1 ;; esac
        done
        if [ -n "${LIVE[$f]:-}" ]; then ref=$((ref + SIZE[$f]))
        elif [ "$held" = 1 ]; then snaponly=$((snaponly + SIZE[$f])); fi
    done
    M_REF=$ref
    M_SNAP=$snaponly
}

# The bytes only snapshot $1 holds: files in it, in no other snapshot, not live.
model_snap_used() {
    local s=$1 f o n=0 other
    for f in ${SNAP[$s]}; do
        [ -n "${LIVE[$f]:-}" ] && continue
        other=0
        for o in "${SNAPS[@]}"; do
            [ "$o" = "$s" ] && continue
            case " ${SNAP[$o]} " in *" $f "*) other=1 ;; esac
        done
        [ "$other" = 0 ] && n=$((n + SIZE[$f]))
    done
    echo "$n"
}

CAPACITY=
# check STEP: the numbers settle (a txg syncs within a few seconds) at the model's.
check() {
    model_numbers
    local i used ref snapu avail ok
    for i in $(seq 1 100); do
        used=$(getp used tank/soak); ref=$(getp referenced tank/soak)
        snapu=$(getp usedbysnapshots tank/soak); avail=$(getp available tank/soak)
        ok=1
        near "$ref" "$M_REF" || ok=0
        near "$snapu" "$M_SNAP" || ok=0
        near "$used" $((M_REF + M_SNAP)) || ok=0
        [ "$used" -eq $(( $(getp usedbydataset tank/soak) + snapu + $(getp usedbychildren tank/soak) +
            $(getp usedbyrefreservation tank/soak) )) ] || ok=0
        # What the dataset uses and what is still available to it add up to the same
        # pool, whatever is written or freed.
        [ -z "$CAPACITY" ] || near $((used + avail)) "$CAPACITY" || ok=0
        [ "$ok" = 1 ] && break
        sleep 0.2
    done
    [ "$ok" = 1 ] || fail "$1: used $used referenced $ref usedbysnapshots $snapu available $avail;" \
        "model referenced $M_REF usedbysnapshots $M_SNAP (used+available: $((used + avail)), first $CAPACITY)"
    local s want got
    for s in "${SNAPS[@]}"; do
        want=$(model_snap_used "$s")
        got=$(getp used "tank/soak@$s")
        near "$got" "$want" || fail "$1: tank/soak@$s used $got, model $want"
    done
    [ -n "$CAPACITY" ] || CAPACITY=$((used + avail))
}

# fill NAME MIB: writes a new file; records what the server took.
fill() {
    local name=$1 bytes=$(($2 * MIB)) rc=0
    "$NFSCLIENT" "$URL" fill "$name" "$bytes" >"$LAST_STDOUT" 2>"$LAST_STDERR" || rc=$?
    case "$rc" in
    0) ;;
    3) grep -q '^ENOSPC' "$LAST_STDOUT" || fail "fill $name: $(cat "$LAST_STDOUT")" ;;
    *) fail "fill $name: rc $rc: $(cat "$LAST_STDERR")" ;;
    esac
    SIZE[$name]=$(awk '{print $2}' "$LAST_STDOUT")
    LIVE[$name]=1
    return "$rc"
}

remove() {
    nfs_client "$URL" rm "$1"
    unset "LIVE[$1]"
}

snapshot() {
    local s=$1 f list=""
    run_ok "$CAIRN" snapshot "tank/soak@$s"
    for f in "${!LIVE[@]}"; do list="$list $f"; done
    SNAP[$s]=$list
    SNAPS+=("$s")
}

destroy_snapshot() {
    local s=$1 i
    run_ok "$CAIRN" destroy "tank/soak@$s"
    for i in "${!SNAPS[@]}"; do [ "${SNAPS[$i]}" = "$s" ] && unset "SNAPS[$i]"; done
    SNAPS=("${SNAPS[@]}")
    unset "SNAP[$s]"
}

# compressratio is a ratio of data: directories and a few tiny files do not make an
# empty dataset (or pool) read 70x.
for i in 1 2 3; do nfs_client "$URL" put "tiny$i" hello; done
run_ok "$CAIRN" create tank/soak/empty
for i in $(seq 1 50); do
    [ "$(getp referenced tank/soak)" -gt 0 ] && break
    sleep 0.2
done
for ds in tank tank/soak tank/soak/empty; do
    [ "$(getp compressratio $ds)" = 1.00 ] || fail "$ds compressratio $(getp compressratio $ds), not 1.00x"
done
"$CAIRN" pool list -H tank | grep -q '1.00x' || fail "pool RATIO: $("$CAIRN" pool list tank)"
for i in 1 2 3; do nfs_client "$URL" rm "tiny$i"; done
run_ok "$CAIRN" destroy tank/soak/empty
pass "an empty pool and dataset read 1.00x"

check start
# ---- the report's case: a snapshot leaves used as it was ----
fill f0 48 || fail "48 MiB did not fit an empty pool"
check "after 48 MiB"
used_before=$(getp used tank/soak)
snapshot s0
check "after a snapshot"
[ "$(getp used tank/soak)" -eq "$used_before" ] || fail "a snapshot changed used"
remove f0
check "after removing the snapshotted file"
pass "used after a snapshot, usedbysnapshots after the remove"

# ---- random steps ----
for step in $(seq 1 24); do
    live=("${!LIVE[@]}")
    op=$((RANDOM % 10))
    if [ "$op" -lt 4 ]; then
        seq_no=$((seq_no + 1))
        fill "r$seq_no" $((8 + RANDOM % 40)) || true
        what="fill r$seq_no (${SIZE[r$seq_no]} bytes)"
    elif [ "$op" -lt 7 ] && [ "${#live[@]}" -gt 0 ]; then
        f=${live[$((RANDOM % ${#live[@]}))]}
        remove "$f"
        what="remove $f"
    elif [ "$op" -lt 8 ] && [ "${#SNAPS[@]}" -lt 4 ]; then
        snapshot "k$step"
        what="snapshot k$step"
    elif [ "${#SNAPS[@]}" -gt 0 ]; then
        s=${SNAPS[$((RANDOM % ${#SNAPS[@]}))]}
        destroy_snapshot "$s"
        what="destroy @$s"
    else
        continue
    fi
    check "step $step: $what"
done
pass "24 random steps of writes, removes, snapshots and snapshot destroys match the model"

# ---- a full pool, emptied, takes writes again at once, as much as before ----
for s in "${SNAPS[@]}"; do destroy_snapshot "$s"; done
for f in "${!LIVE[@]}"; do remove "$f"; done
check "emptied"
first=0
for i in 1 2 3; do
    if ! fill "full$i" 400; then break; fi
done
for f in "${!LIVE[@]}"; do first=$((first + SIZE[$f])); done
avail=$(getp available tank/soak)
[ "$avail" -lt $((8 * MIB)) ] || fail "refused for space with $avail available"
check "full"
for f in "${!LIVE[@]}"; do remove "$f"; done
# No wait: the space the removes free is on its way, and the write waits for it.
fill again 200 || fail "a write right after emptying a full pool was refused"
remove again
second=0
for i in 1 2 3; do
    if ! fill "refill$i" 400; then break; fi
done
for f in refill1 refill2 refill3; do [ -n "${LIVE[$f]:-}" ] && second=$((second + SIZE[$f])); done
near "$second" "$first" || fail "the refilled pool took $second bytes, the first fill $first"
check "refilled"
pass "a full pool takes writes right after its files go, and as much as before ($first / $second bytes)"

# ---- quota counts snapshots ----
for f in "${!LIVE[@]}"; do remove "$f"; done
run_ok "$CAIRN" create -o quota=96M tank/soak/q
QURL=$(nfs_url /tank/soak/q)
"$NFSCLIENT" "$QURL" fill a $((64 * MIB)) >/dev/null || fail "64 MiB under a 96M quota was refused"
run_ok "$CAIRN" snapshot tank/soak/q@one
nfs_client "$QURL" rm a
rc=0
"$NFSCLIENT" "$QURL" fill b $((64 * MIB)) >"$LAST_STDOUT" 2>"$LAST_STDERR" || rc=$?
[ "$rc" = 3 ] && grep -q '^EDQUOT' "$LAST_STDOUT" ||
    fail "a quota whose snapshot holds 64 MiB took 64 MiB more: rc $rc $(cat "$LAST_STDOUT" "$LAST_STDERR")"
written=$(awk '{print $2}' "$LAST_STDOUT")
near "$written" $((32 * MIB)) || [ "$written" -lt $((32 * MIB)) ] ||
    fail "EDQUOT only after $written bytes next to a 64 MiB snapshot under quota=96M"
for i in $(seq 1 50); do
    [ "$(getp used tank/soak/q)" -le $((96 * MIB)) ] && break
    sleep 0.2
done
[ "$(getp used tank/soak/q)" -le $((96 * MIB)) ] || fail "used $(getp used tank/soak/q) over quota=96M"
run_fail "$CAIRN" set quota=16M tank/soak/q
expect_stderr 'quota'
pass "quota counts what snapshots hold (refused after $written bytes); a quota under use is refused"
