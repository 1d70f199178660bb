#!/usr/bin/env bash
# IN-TYPE through the HTTP listener means what it means in mihomo
# (listener/http/proxy.go): a CONNECT is an HTTPS inbound, a plain forwarded
# request an HTTP one. One rule rejects CONNECTs to one port, another plain
# requests to the other; each kind passes where only the other is refused.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start
bundle_write <<LUA
chute.route = chute.rules {
  { "AND", { { "IN-TYPE", "HTTPS" }, { "DST-PORT", "$ORIGIN_PORT" } }, "REJECT" },
  { "AND", { { "IN-TYPE", "HTTP" }, { "DST-PORT", "$ALT_PORT" } }, "REJECT" },
  { "FINAL", "DIRECT" },
}
LUA
chute_start

PROXY="http://127.0.0.1:$HTTP_PORT"
connect_code() { # URL: the proxy's answer to curl's CONNECT
    curl --silent --max-time 10 -o /dev/null -w '%{http_connect}' -p -x "$PROXY" "$1" \
        2>/dev/null || true
}

say "IN-TYPE,HTTPS: a CONNECT to :$ORIGIN_PORT is rejected, a plain GET passes"
assert_eq 403 "$(connect_code "http://localhost:$ORIGIN_PORT/small")" "CONNECT answered 403"
assert_log "tcp http .* -> localhost:$ORIGIN_PORT policy=REJECT rule=\"route rule 1 " \
    "flow log: the CONNECT rejected by rule 1 (IN-TYPE,HTTPS)"
assert_eq 200 "$(http_status -x "$PROXY" "http://localhost:$ORIGIN_PORT/small")" \
    "a forwarded GET to the same port passes"

say "IN-TYPE,HTTP: a plain GET to :$ALT_PORT is rejected, a CONNECT passes"
assert_eq 403 "$(http_status -x "$PROXY" "http://localhost:$ALT_PORT/small")" \
    "forwarded GET answered 403"
assert_log "tcp http .* -> localhost:$ALT_PORT policy=REJECT rule=\"route rule 2 " \
    "flow log: the plain request rejected by rule 2 (IN-TYPE,HTTP)"
assert_eq 200 "$(connect_code "http://localhost:$ALT_PORT/small")" "a CONNECT to the same port passes"

e2e_pass
