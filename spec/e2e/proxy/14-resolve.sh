#!/usr/bin/env bash
# IP rules on named flows (issue 13): an IP-CIDR rule without no-resolve
# resolves the SOCKS5 (socks5h) or HTTP proxy client's name through chute's
# resolver (here the hosts file: localhost is 127.0.0.1) when it is reached
# before any match, and decides on the address; with no-resolve the rule
# skips names; an IP literal never resolves; the decision cache keeps the
# outcome, so the name resolves once however many flows follow.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start
bundle_write <<LUA
chute.route = chute.rules {
  {"IP-CIDR", "127.0.0.1/32", "DIRECT", "no-resolve"},
  {"IP-CIDR", "127.0.0.0/8", "REJECT"},
  {"FINAL", "DIRECT"},
}
LUA
chute_start
SOCKS="127.0.0.1:$SOCKS_PORT"

say "127.0.0.1 (an address): rule 1 matches it, nothing resolves"
got=$(fetch_sha -x "socks5://$SOCKS" "http://127.0.0.1:$ORIGIN_PORT/small")
assert_eq "$SHA_SMALL" "$got" "the file arrives DIRECT"
assert_log "tcp socks .* -> 127\.0\.0\.1:$ORIGIN_PORT policy=DIRECT rule=\"route rule 1 IP-CIDR,127\.0\.0\.1/32\"" \
    "flow line for 127.0.0.1: DIRECT by route"

say "localhost (a name): rule 1 skips it (no-resolve), rule 2 resolves it into 127.0.0.0/8"
rc=$(curl_rc -x "socks5h://$SOCKS" "http://localhost:$ORIGIN_PORT/small")
assert_eq 97 "$rc" "refused as any REJECT: SOCKS5 reply 2 (curl exit 97)"
assert_log "connect localhost:$ORIGIN_PORT: rejected" "the open is refused after the resolution"
assert_log "tcp socks .* -> localhost:$ORIGIN_PORT policy=REJECT rule=\"route rule 2 IP-CIDR,127\.0\.0\.0/8\" .*close=rejected" \
    "flow line: REJECT by rule 2, close=rejected"

say "localhost again: the decision cache answers, no second lookup"
rc=$(curl_rc -x "socks5h://$SOCKS" "http://localhost:$ORIGIN_PORT/small")
[ "$rc" != 0 ] || fail "the second flow to the name was not refused"
wait_log_count "tcp socks .* -> localhost:$ORIGIN_PORT policy=REJECT" 2 10

say "the same name through the HTTP proxy (its own cache key: one more lookup)"
status=$(http_status -x "http://127.0.0.1:$HTTP_PORT" "http://localhost:$ORIGIN_PORT/small")
assert_eq 403 "$status" "refused as any REJECT: 403 Forbidden"
assert_log "tcp http .* -> localhost:$ORIGIN_PORT policy=REJECT" "HTTP flow line: policy=REJECT"

chute_stop_within 5
assert_log "stats .* dcache_hits=1 .* rule_resolves=2( |\$)" \
    "two resolutions for IP rules, one flow decided by the cache (the stats line)"
e2e_pass
