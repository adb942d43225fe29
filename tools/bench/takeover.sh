#!/usr/bin/env bash
# Takeover time on a two-head cluster (issue 29): runs the real Pacemaker/Corosync
# cluster of tests/integration/test_ha_cluster.sh (two nodes in namespaces on this
# machine, needs root) RUNS times and prints, per event and protocol, the time from the
# last acknowledged write on the old head to the first on the new one, as the clients
# see it (NFSv3 FILE_SYNC and NFSv4 DATA_SYNC4 records, iSCSI FUA blocks; the clients'
# per-request deadline is 5 s), and the cluster's own part: from the event to the
# service address being up on the new head (Pacemaker's log), and where that time went:
# peer declared lost (Corosync token + consensus), fenced, address stopped on the old
# head (planned), pool started and address up on the new one, in seconds after the event. Median and max over the runs.
# Usage: [HA_TOKEN_MS=3000] tools/bench/takeover.sh [RUNS] (the Corosync token the test
# cluster uses, tests/integration/ha_lib.sh)
set -euo pipefail
RUNS=${1:-1}
BUILD=$(cd "${BUILD:-build}" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(mktemp)
trap 'rm -f "$OUT" "$OUT.tl"' EXIT
for r in $(seq 1 "$RUNS"); do
    if ! CAIRN_BIN="$BUILD" CAIRN_SRC="$SRC" CAIRN_TEST_TMP="$BUILD/testtmp" \
        bash "$SRC/tests/integration/test_ha_cluster.sh" >"$OUT.run" 2>&1; then
        tail -20 "$OUT.run" >&2
        echo "takeover.sh: run $r failed" >&2
        exit 1
    fi
    # "takeover (EVENT): NFS X s, NFSv4 Y s, iSCSI Z s from ...; address up on NODE A s after the event"
    sed -n 's/^takeover (\(.*\)): NFS \([0-9.]*\) s, NFSv4 \([0-9.]*\) s, iSCSI \([0-9.]*\) s.* \([0-9.]*\) s after the event/\1|\2|\3|\4|\5/p' \
        "$OUT.run" >>"$OUT"
    # "timeline (EVENT): peer lost A s, fenced B s, address down C s, pool started D s, address up E s"
    sed -n 's/^timeline (\(.*\)): peer lost \([0-9.-]*\) s, fenced \([0-9.-]*\) s, address down \([0-9.-]*\) s, pool started \([0-9.-]*\) s, address up \([0-9.-]*\) s$/\1|\2|\3|\4|\5|\6/p' \
        "$OUT.run" >>"$OUT.tl"
done
rm -f "$OUT.run"
printf '%-62s %10s %10s %10s %10s\n' "event ($RUNS run(s)), seconds median/max" "NFSv3" "NFSv4" "iSCSI" "address"
awk -F'|' '!seen[$1]++ { order[++n] = $1 }
     { v3[$1] = v3[$1] " " $2; v4[$1] = v4[$1] " " $3; isc[$1] = isc[$1] " " $4; ip[$1] = ip[$1] " " $5 }
     function medmax(list,   a, k, i, j, t) {
         k = split(list, a, " ")
         for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
         return sprintf("%.1f/%.1f", a[int((k + 1) / 2)], a[k])
     }
     END { for (i = 1; i <= n; i++) { e = order[i]
               printf "%-62s %10s %10s %10s %10s\n", e, medmax(v3[e]), medmax(v4[e]), medmax(isc[e]), medmax(ip[e]) } }' "$OUT"

echo
printf '%-62s %9s %9s %9s %9s %9s\n' "where the time went, seconds after the event (median)" "lost" "fenced" "down" "started" "up"
awk -F'|' '!seen[$1]++ { order[++n] = $1 }
     { for (k = 2; k <= 6; k++) col[$1, k] = col[$1, k] " " $k }
     function med(list,   a, m, i, j, t) {
         m = split(list, a, " ")
         for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
         return a[int((m + 1) / 2)] == "-" ? "-" : sprintf("%.1f", a[int((m + 1) / 2)])
     }
     END { for (i = 1; i <= n; i++) { e = order[i]; printf "%-62s", e
               for (k = 2; k <= 6; k++) printf " %9s", med(col[e, k]); printf "\n" } }' "$OUT.tl"
