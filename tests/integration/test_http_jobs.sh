#!/usr/bin/env bash
# Jobs through the REST API: a change sent with `Prefer: respond-async` answers 202
# with a Location and the job at once, runs in the background and ends as
# succeeded (with the request's result) or failed (with the CLI's one-line error
# and status); GET /jobs also shows each pool's scrub and resilver with progress;
# a read-only token still gets 403 and no job; unknown jobs are 404.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"

command -v curl >/dev/null || { echo "skip: curl is not installed"; exit 77; }
HPORT=$(cairn_random_port)
U="https://127.0.0.1:$HPORT"
sparse_files "$T/dev" 1G a b
# wait_job ID: polls GET /jobs/ID until it is no longer running (30 s).
wait_job() {
    local i
    for i in $(seq 1 300); do
        http GET "/api/v1/jobs/$1" "$ADMIN"
        expect_code 200
        [ "$(json_eval 'd["state"]')" != running ] && return 0
        sleep 0.1
    done
    fail "job $1 still running after 30 s: $(cat "$LAST_STDOUT")"
}

daemon_start d1 --http-listen "127.0.0.1:$HPORT"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create tank/big
run_ok "$CAIRN" create -V 256M tank/vol
run_ok "$CAIRN" token create admin
ADMIN=$(cat "$LAST_STDOUT")
run_ok "$CAIRN" token create --read-only viewer
RO=$(cat "$LAST_STDOUT")

# ---- an asynchronous destroy ----
http DELETE /api/v1/datasets/tank/big "$ADMIN" "" -H 'Prefer: respond-async, wait=5'
expect_code 202
ID=$(json_eval 'd["id"]')
[[ "$ID" =~ ^job-[0-9]+$ ]] || fail "job id '$ID'"
grep -qi "^location: /api/v1/jobs/$ID" "$T/headers" || fail "no Location: $(cat "$T/headers")"
[ "$(json_eval 'd["operation"]+" "+d["method"]+" "+d["resource"]+" "+d["user"]')" = \
  "ds_destroy DELETE /api/v1/datasets/tank/big token admin" ] || fail "job: $(cat "$LAST_STDOUT")"
wait_job "$ID"
[ "$(json_eval 'd["state"], d["status"]' | tr '\n' ' ')" = "succeeded 200 " ] || fail "job: $(cat "$LAST_STDOUT")"
run_fail "$CAIRN" list tank/big
pass "DELETE with Prefer: respond-async: 202, Location, the job succeeded, the dataset is gone"

# ---- a job that fails keeps the error and its status ----
http DELETE /api/v1/datasets/tank/nosuch "$ADMIN" "" -H 'Prefer: respond-async'
expect_code 202
ID=$(json_eval 'd["id"]')
wait_job "$ID"
[ "$(json_eval 'd["state"], d["status"]' | tr '\n' ' ')" = "failed 404 " ] || fail "job: $(cat "$LAST_STDOUT")"
[[ "$(json_eval 'd["error"]')" == *tank/nosuch* ]] || fail "job error: $(cat "$LAST_STDOUT")"
# ... and a synchronous request is unchanged by the jobs (no Prefer, no job).
http POST /api/v1/datasets "$ADMIN" '{"name":"tank/sync"}'
expect_code 201
# A read-only token is refused before any job exists.
http DELETE /api/v1/datasets/tank/sync "$RO" "" -H 'Prefer: respond-async'
expect_code 403
run_ok "$CAIRN" list tank/sync
# Not quite the preference: synchronous.
http POST /api/v1/datasets "$ADMIN" '{"name":"tank/sync2"}' -H 'Prefer: respond-asyncly'
expect_code 201
pass "a failed job keeps status and error; read-only refused without a job; other Prefer values ignored"

# ---- scans as jobs: scrub, then a resilver ----
run_ok "$CAIRN" pool scrub tank
http GET /api/v1/jobs "$ADMIN"
expect_code 200
python3 - "$LAST_STDOUT" <<'PY' || fail "scan job: $(cat "$LAST_STDOUT")"
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
scan = [j for j in jobs if j["id"] == "scan-tank"]
assert len(scan) == 1, jobs
s = scan[0]
assert s["kind"] == "scan" and s["operation"] == "scrub" and s["resource"] == "tank", s
assert s["state"] in ("running", "succeeded") and 0 <= s["progress"] <= 1, s
assert len([j for j in jobs if j["kind"] == "api"]) == 2, jobs
PY
run_ok "$CAIRN" pool wait tank
http GET /api/v1/jobs/scan-tank "$RO"
expect_code 200
[ "$(json_eval 'd["operation"], d["state"], d["progress"]' | tr '\n' ' ')" = "scrub succeeded 1.0 " ] ||
    fail "finished scrub: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" pool attach tank "$T/dev/a" "$T/dev/b"
run_ok "$CAIRN" pool wait tank
http GET /api/v1/jobs/scan-tank "$ADMIN"
expect_code 200
[ "$(json_eval 'd["operation"], d["state"]' | tr '\n' ' ')" = "resilver succeeded " ] ||
    fail "resilver: $(cat "$LAST_STDOUT")"
http GET /api/v1/jobs/job-999 "$ADMIN"
expect_code 404
expect_stdout "no job 'job-999'"
http POST /api/v1/jobs "$ADMIN" '{}'
expect_code 405
pass "scrub and resilver listed as jobs with progress; unknown jobs 404"
