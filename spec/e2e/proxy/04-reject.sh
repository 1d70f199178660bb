#!/usr/bin/env bash
# route() returns REJECT for one host: SOCKS5 answers "not allowed" (REP 2),
# the HTTP proxy answers 403 (forwarding and CONNECT), other hosts pass.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start
bundle_write <<'LUA'
function chute.route(flow)
  if flow.host == "blocked.test" then
    return "REJECT"
  end
  return "DIRECT"
end
LUA
chute_start

SOCKS="socks5h://127.0.0.1:$SOCKS_PORT"
PROXY="http://127.0.0.1:$HTTP_PORT"

say "SOCKS5 to blocked.test:$ORIGIN_PORT"
# curl 7.x reports any SOCKS5 reply code != 0 as exit 97 (CURLE_PROXY); its
# message names the code, and 2 is "connection not allowed by ruleset".
rc=0
err=$(curl --silent --show-error --max-time 10 -o /dev/null -x "$SOCKS" \
    "http://blocked.test:$ORIGIN_PORT/small" 2>&1) || rc=$?
assert_eq 97 "$rc" "curl exit status for a rejected SOCKS5 request"
assert_match "not allowed|\(2\)" "$err" "curl saw reply code 2 (not allowed)"
assert_log "tcp socks 127\.0\.0\.1:[0-9]+ -> blocked\.test:$ORIGIN_PORT policy=REJECT rule=\"route\" up=0 down=0 .* close=rejected" \
    "flow log: blocked.test via SOCKS5, policy=REJECT by route, no bytes, close=rejected"

say "control: the same bundle lets localhost through"
got=$(fetch_sha -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")
assert_eq "$SHA_SMALL" "$got" "localhost via SOCKS5 gets the file"
assert_log "tcp socks .* -> localhost:$ORIGIN_PORT policy=DIRECT rule=\"route\"" "flow log: localhost DIRECT"

say "HTTP proxy: GET http://blocked.test:$ORIGIN_PORT/small"
assert_eq 403 "$(http_status -x "$PROXY" "http://blocked.test:$ORIGIN_PORT/small")" \
    "forwarded GET to blocked.test answered 403"
assert_log "tcp http 127\.0\.0\.1:[0-9]+ -> blocked\.test:$ORIGIN_PORT policy=REJECT rule=\"route\"" \
    "flow log: blocked.test via the HTTP proxy, policy=REJECT"

say "HTTP proxy: CONNECT blocked.test:$ORIGIN_PORT"
code=$(curl --silent --max-time 10 -o /dev/null -w '%{http_connect}' -p -x "$PROXY" \
    "http://blocked.test:$ORIGIN_PORT/small" 2>/dev/null || true)
assert_eq 403 "$code" "CONNECT to blocked.test answered 403"
n=$(wait_log_count "tcp http .* -> blocked\.test:$ORIGIN_PORT policy=REJECT" 2)
assert_eq 2 "$n" "two REJECT flow lines from the HTTP proxy (GET and CONNECT)"

say "HTTP proxy: localhost still passes"
assert_eq 200 "$(http_status -x "$PROXY" "http://localhost:$ORIGIN_PORT/small")" "forwarded GET to localhost"

e2e_pass
