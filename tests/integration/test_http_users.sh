#!/usr/bin/env bash
# Users of the web UI and their sessions: `cairn user add|passwd|remove|list`
# (password from stdin, only yescrypt hashes stored), log-in with POST
# /api/v1/sessions (a session token and an HttpOnly/Secure/SameSite=Strict
# cookie), the session used as a bearer token and as the cookie, roles (a
# read-only user's change is 403 and changes nothing), log-out, sessions ended by
# passwd and remove and by a restart, API tokens untouched, refused log-ins
# counted towards the 429 of brute force.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"

command -v curl >/dev/null || { echo "skip: curl is not installed"; exit 77; }
HPORT=$(cairn_random_port)
U="https://127.0.0.1:$HPORT"
sparse_files "$T/dev" 512M a
json_field() { json_eval "d['$1']"; }
# login USER PASSWORD: sets SESSION (and the cookie jar $T/jar).
login() {
    http POST /api/v1/sessions "" "{\"user\":\"$1\",\"password\":\"$2\"}" -c "$T/jar"
}

daemon_start d1 --http-listen "127.0.0.1:$HPORT"
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" token create admin
ADMIN=$(cat "$LAST_STDOUT")

# ---- the CLI: passwords from stdin, one-line refusals, only hashes kept ----
echo 'correct horse' | run_ok "$CAIRN" user add ann
echo 'battery staple' | run_ok "$CAIRN" user add --read-only bob
echo 'something else' | run_fail "$CAIRN" user add ann
expect_stderr "user 'ann' already exists"
echo 'short' | run_fail "$CAIRN" user add cy
expect_stderr 'a password needs 8 to 256 characters'
run_fail "$CAIRN" user add dee </dev/null
expect_stderr 'no password on stdin'
echo 'long enough' | run_fail "$CAIRN" user add 'no good'
expect_stderr 'bad token name|bad user name|letters, digits'
echo 'long enough' | run_fail "$CAIRN" user passwd zed
expect_stderr "no user named 'zed'"
run_fail "$CAIRN" user frobnicate
expect_stderr "user: unknown subcommand 'frobnicate'"
run_ok "$CAIRN" user list -H
[ "$(cut -f1,2 "$LAST_STDOUT" | tr '\t\n' ' ')" = "ann admin bob read-only " ] ||
    fail "user list: $(cat "$LAST_STDOUT")"
grep -q 'correct horse' "$T/d1/http-users" && fail "a password is stored in the clear"
grep -qE '^ann admin [0-9]+ \$y\$' "$T/d1/http-users" || fail "no yescrypt hash: $(cat "$T/d1/http-users")"
[ "$(stat -c %a "$T/d1/http-users")" = 600 ] || fail "the user file is readable by others"
pass "user add/list/passwd refusals; hashes only, mode 0600"

# ---- log-in ----
login ann 'wrong password'
expect_code 401
expect_stdout 'wrong user name or password'
login nobody 'correct horse'
expect_code 401
expect_stdout 'wrong user name or password'
http POST /api/v1/sessions "" 'not json'
expect_code 400
login ann 'correct horse'
expect_code 201
ANN=$(json_field token)
[[ "$ANN" =~ ^csess_[0-9a-f]{64}$ ]] || fail "session token '$ANN'"
[ "$(json_field role)" = admin ] || fail "role: $(cat "$LAST_STDOUT")"
grep -i '^set-cookie:' "$T/headers" | grep -q "cairn_session=$ANN; Path=/; Max-Age=43200; Secure; HttpOnly; SameSite=Strict" ||
    fail "cookie: $(grep -i set-cookie "$T/headers")"
http GET /api/v1/sessions/current "$ANN"
expect_code 200
[ "$(json_field user)/$(json_field role)/$(json_field via)" = ann/admin/user ] ||
    fail "whoami: $(cat "$LAST_STDOUT")"
# The cookie alone authenticates (what the browser sends).
http GET /api/v1/sessions/current "" "" -b "$T/jar"
expect_code 200
[ "$(json_field user)" = ann ] || fail "cookie whoami: $(cat "$LAST_STDOUT")"
http GET /api/v1/sessions/current "$ADMIN"
expect_code 200
[ "$(json_field via)" = token ] || fail "token whoami: $(cat "$LAST_STDOUT")"
pass "log-in: 401 for a wrong password or user, 201 with a session token and a strict cookie"

# ---- roles: the admin's session changes things, the read-only one's cannot ----
http POST /api/v1/datasets "" '{"name":"tank/by-ann"}' -b "$T/jar"
expect_code 201
run_ok "$CAIRN" list -H -o name tank/by-ann
login bob 'battery staple'
expect_code 201
BOB=$(json_field token)
http POST /api/v1/datasets "$BOB" '{"name":"tank/by-bob"}'
expect_code 403
expect_stdout "user 'bob' is read-only"
run_fail "$CAIRN" list tank/by-bob
http GET /api/v1/datasets "$BOB"
expect_code 200
expect_stdout 'tank/by-ann'
grep -q "user 'ann' POST /api/v1/datasets -> 201" "$T/d1.daemon.log" || fail "no audit line naming the user"
pass "an admin user's session creates a dataset; a read-only user's gets 403 and changes nothing"

# ---- log-out; passwd and remove end sessions ----
http DELETE /api/v1/sessions/current "$ADMIN"
expect_code 400
expect_stdout 'an API token is not a session'
http DELETE /api/v1/sessions/current "$BOB"
expect_code 200
http GET /api/v1/sessions/current "$BOB"
expect_code 401
echo 'a new secret' | run_ok "$CAIRN" user passwd ann
http GET /api/v1/sessions/current "$ANN"
expect_code 401
login ann 'correct horse'
expect_code 401
login ann 'a new secret'
expect_code 201
ANN=$(json_field token)
run_ok "$CAIRN" user remove ann
http GET /api/v1/sessions/current "$ANN"
expect_code 401
login ann 'a new secret'
expect_code 401
http GET /api/v1/sessions/current "$ADMIN"
expect_code 200
pass "log-out; passwd and remove end the user's sessions; tokens unaffected"

# ---- a restart logs everyone out; users stay ----
login bob 'battery staple'
expect_code 201
BOB=$(json_field token)
daemon_stop
daemon_start d1 --http-listen "127.0.0.1:$HPORT"
http GET /api/v1/sessions/current "$BOB"
expect_code 401
login bob 'battery staple'
expect_code 201
pass "sessions end with a restart; users are kept"

# ---- refused log-ins count towards brute-force protection ----
for i in $(seq 1 10); do login bob "guess number $i"; done
login bob 'battery staple'
expect_code 429
pass "ten refused log-ins from an address: 429 even with the right password"
