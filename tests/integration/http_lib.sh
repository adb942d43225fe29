# Helpers for the tests of cairnd's HTTPS plane (source after lib.sh; set U to
# https://127.0.0.1:PORT first).

# http METHOD PATH TOKEN [BODY [CURL-ARGS...]]: the status in $CODE, the body in
# $LAST_STDOUT, the headers in $T/headers. TOKEN "" sends no credential; a BODY
# (when not "") goes as JSON.
http() {
    local method=$1 path=$2 token=$3 body=${4:-}
    shift $(($# < 4 ? $# : 4))
    local args=(-sk -D "$T/headers" -o "$LAST_STDOUT" -w '%{http_code}' -X "$method" "$U$path")
    [ -n "$token" ] && args+=(-H "Authorization: Bearer $token")
    [ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data "$body")
    CODE=$(curl "${args[@]}" "$@")
}
expect_code() { [ "$CODE" = "$1" ] || fail "HTTP $CODE, not $1: $(cat "$LAST_STDOUT")"; }
# json_eval EXPR: a Python expression over the last answer, parsed as d.
json_eval() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$LAST_STDOUT"; }
