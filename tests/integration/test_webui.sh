#!/usr/bin/env bash
# The web UI in a real browser: cairnd serves the pages (no credential for the
# static files; strict CSP, no framing; nothing outside its table of assets),
# and headless Chromium logs in, creates a filesystem, sets a property, takes
# and destroys a snapshot, starts a scrub, watches the NFS chart
# move while an NFS client writes, switches analytics drill-downs on, sees 32
# known NFS WRITEs and 40 iSCSI writes in the dashboard's top clients, shares and
# LUNs, the NFS WRITEs in a worksheet series, a share's files and in the
# heat map the WRITE row drills down to, sees an offlined disk on the dashboard and
# in the pool tree, logs out, and checks a read-only user has no change buttons
# (nor analytics switches)
# (tests/integration/webui_check.py). Screenshots are kept in
# $CAIRN_BIN/artefacts/webui (printed below). Skips (77) only when Chromium or
# Selenium is missing or Chromium cannot start here.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

command -v curl >/dev/null || { echo "skip: curl is not installed"; exit 77; }
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || { echo "skip: chromium is not installed"; exit 77; }
# Debian's python3-selenium is for the system python, which may not be the first python3.
PY=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import selenium' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "skip: python3-selenium is not installed"; exit 77; }

HPORT=$(cairn_random_port)
U="https://127.0.0.1:$HPORT"
sparse_files "$T/dev" 512M a b
nfs_daemon_start d1 --http-listen "127.0.0.1:$HPORT"
run_ok "$CAIRN" pool create tank mirror "$T/dev/a" "$T/dev/b"
run_ok "$CAIRN" create -o sharenfs=no_root_squash tank/share
run_ok "$CAIRN" create -V 16M tank/vol
TGT=iqn.2026-12.org.cairn.test:webui
INITIATOR=iqn.2026-11.org.cairn.test:client # iscsi_client's
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" tank/vol
ISCSI_PORT=$(grep -a 'iscsi: listening on port' "$T/d1.daemon.log" | tail -n 1 | sed -E 's/.*port ([0-9]+).*/\1/')
echo 'web admin password' | run_ok "$CAIRN" user add webadmin
echo 'web viewer password' | run_ok "$CAIRN" user add --read-only viewer

# ---- what cairnd serves without a credential: the files, nothing else ----
headers() { curl -sk -o "$LAST_STDOUT" -D "$T/headers" -w '%{http_code}' "$@"; }
[ "$(headers "$U/")" = 200 ] || fail "GET / without a credential"
grep -qi '^content-type: text/html; charset=utf-8' "$T/headers" || fail "/: $(cat "$T/headers")"
grep -qi "^content-security-policy: default-src 'none'; script-src 'self';" "$T/headers" ||
    fail "no strict CSP on /: $(cat "$T/headers")"
grep -qi '^x-frame-options: DENY' "$T/headers" || fail "no X-Frame-Options on /"
grep -q '<script' "$LAST_STDOUT" && ! grep -q '<script[^>]*src=' "$LAST_STDOUT" &&
    fail "an inline script in index.html"
[ "$(headers "$U/ui/app.js")" = 200 ] || fail "GET /ui/app.js"
grep -qi '^content-type: text/javascript; charset=utf-8' "$T/headers" || fail "app.js: $(cat "$T/headers")"
[ "$(headers "$U/ui/uPlot.min.js")" = 200 ] || fail "uPlot is not built in"
for bad in /ui/nothing.js /ui/../ui/app.js /ui/%2e%2e/%2e%2e/etc/passwd /ui//app.js; do
    code=$(headers --path-as-is "$U$bad")
    [ "$code" = 404 ] || fail "GET $bad: $code, not 404"
done
code=$(headers -X POST "$U/")
[ "$code" = 405 ] || fail "POST /: $code, not 405"
[ "$(headers "$U/api/v1/counters")" = 401 ] || fail "/api/v1/counters without a credential"
# The log-in page asks who is logged in without a credential on every load: that
# is no guess, so it must not count towards the brute-force limit.
for i in $(seq 1 12); do headers "$U/api/v1/sessions/current" >/dev/null; done
code=$(headers -X POST -H 'Content-Type: application/json' \
    --data '{"user":"viewer","password":"web viewer password"}' "$U/api/v1/sessions")
[ "$code" = 201 ] || fail "log-in after 12 loads of the log-in page: $code $(cat "$LAST_STDOUT")"
pass "static files without a credential, with CSP and X-Frame-Options; nothing outside the table"

# ---- the browser ----
DEV="$T/dev/b"
SHOTS="$T/screens"
rc=0
"$PY" "$CAIRN_SRC/tests/integration/webui_check.py" "$U" "$SHOTS" \
    'webadmin:web admin password' 'viewer:web viewer password' \
    "$CAIRN_BIN/nfs_client $(nfs_url /tank/share) syncwrite webload" \
    "$CAIRN pool offline tank $DEV" "$DEV" \
    "$CAIRN_BIN/nfs_client $(nfs_url /tank/share) stream counted 2 64 0" /tank/share/counted 32 \
    "$CAIRN_BIN/iscsi_client write 127.0.0.1:$ISCSI_PORT $TGT 7 40 1" "$INITIATOR" "$TGT lun 0" 40 ||
    rc=$?
KEEP="$CAIRN_BIN/artefacts/webui"
if [ -d "$SHOTS" ]; then
    rm -rf "$KEEP"
    mkdir -p "$KEEP"
    cp "$SHOTS"/*.png "$KEEP"/ 2>/dev/null || true
    echo "screenshots: $KEEP"
fi
[ "$rc" = 77 ] && exit 77
[ "$rc" = 0 ] || fail "the browser checks failed (rc $rc)"
pass "the web UI in headless Chromium"

# ---- /api/v1/counters (what the charts sample) agrees with /metrics ----
# The writer has stopped, so both read the same totals.
run_ok "$CAIRN" token create --read-only reader
RTOK=$(cat "$LAST_STDOUT")
curl -sk -H "Authorization: Bearer $RTOK" "$U/api/v1/counters" >"$T/counters.json"
curl -sk -H "Authorization: Bearer $RTOK" "$U/metrics" >"$T/metrics.txt"
"$PY" - "$T/counters.json" "$T/metrics.txt" <<'PYEOF' || fail "counters and metrics disagree"
import json, re, sys
c = json.load(open(sys.argv[1]))
m = open(sys.argv[2]).read()
def total(name):
    return sum(int(v) for v in re.findall(r"^%s(?:\{[^}]*\})? (\d+)$" % name, m, re.M))
pairs = [("nfs operations", c["nfs"]["operations"], total("cairn_nfs_operations_total")),
         ("nfs written", c["nfs"]["written_bytes"], total("cairn_nfs_written_bytes_total")),
         ("iscsi commands", c["iscsi"]["commands"], total("cairn_iscsi_commands_total"))]
for what, a, b in pairs:
    print("%s: counters %d, metrics %d" % (what, a, b))
    if a != b:
        sys.exit(1)
if c["nfs"]["written_bytes"] < 64 * 1024:
    print("the browser test's writes are not counted")
    sys.exit(1)
PYEOF
pass "/api/v1/counters agrees with /metrics"
