# shellcheck shell=bash
# Helpers for the control API tests (spec/e2e/control/NN-name.sh), on
# loopback with real peers (nginx, curl through chute's SOCKS5 listener).
# Not a test itself (no .sh). Source it instead of lib.sh:
#
#   ctl_init                   e2e_init + origin + CTL_PORT, SECRET, API
#   ctl_bundle [CONFIG] < LUA  a bundle with control = { listen, secret }
#   api ARGS...                curl the API with the secret (Bearer)
#   json EXPR < body           python3: evaluates EXPR with j = the JSON
#   slow_download NAME RATE    a download through chute in the background;
#                              its pid in DL_PID, its curl exit in $E2E_TMP/NAME.rc

# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
TEST_NAME=control-$(basename "${BASH_SOURCE[1]:-$0}" .sh)

ctl_init() {
    e2e_init
    origin_start "${1:-}"
    CTL_PORT=$(e2e_ports 1) || fail "e2e_ports: no free port for the control API"
    SECRET=${SECRET:-e2e-s3cret}
    API=http://127.0.0.1:$CTL_PORT
}

ctl_bundle() {
    local extra=${1:-}
    bundle_write "  control = { listen = \"127.0.0.1:$CTL_PORT\", secret = \"$SECRET\" },
$extra"
}

ctl_start() {
    chute_start
    wait_port 127.0.0.1 "$CTL_PORT" 10 || { chute_alive; fail "the control API does not accept"; }
}

api() {
    curl --silent --show-error --max-time 20 -H "Authorization: Bearer $SECRET" "$@"
}

json() {
    python3 -c 'import json, sys
j = json.load(sys.stdin)
r = eval(sys.argv[1])
print(r if not isinstance(r, (dict, list)) else json.dumps(r))' "$1"
}

slow_download() {
    local name=$1 rate=$2
    ( rc=0
      curl --silent --max-time 60 --limit-rate "$rate" -x "socks5h://127.0.0.1:$SOCKS_PORT" \
          -o "$E2E_TMP/$name.bin" "http://localhost:$ORIGIN_PORT/big.bin" || rc=$?
      echo "$rc" >"$E2E_TMP/$name.rc" ) &
    DL_PID=$!
    E2E_EXTRA_PIDS+=("$DL_PID")
}

# wait_flows N: until GET /connections lists at least N flows (10 s).
wait_flows() {
    for _ in $(seq 100); do
        [ "$(api "$API/connections" | json 'len(j["connections"])')" -ge "$1" ] && return 0
        sleep 0.1
    done
    fail "GET /connections never listed $1 flows"
}
