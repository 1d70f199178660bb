#!/usr/bin/env bash
# A client that resolves through chute's DNS listener (fake-ip) and then
# connects through chute's SOCKS5 or HTTP proxy to the fake IP: the flow
# carries the name (flow.host, the flow line's destination) without a
# lookup, DIRECT resolves the real address once for several fetches
# (cached by TTL), and a fake IP with no name behind it is refused and
# counted (dns_fake_misses).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/dnslib.bash"

dns_init
origin_start
upstream_start --host-record=origin.test.example,127.0.0.1,60
dns_bundle 'persist = false' <<'LUA'
function chute.route(flow)
  if flow.host == "origin.test.example" then return "DIRECT" end
  return "REJECT"
end
LUA
dns_chute_start

f=$(dq origin.test.example A)
assert_in_net "$f" 198.18.0.0/15 "origin.test.example gets a fake IP ($f)"
dstats A
assert_eq 0 "$A_resolver_sent" "no upstream query yet"

say "SOCKS5 (the client resolved, chute gets the fake IP)"
got=$(fetch_sha -x "socks5://127.0.0.1:$SOCKS_PORT" "http://$f:$ORIGIN_PORT/small")
assert_eq "$SHA_SMALL" "$got" "the fake IP reaches the origin through SOCKS5"
assert_log "tcp socks 127\.0\.0\.1:[0-9]+ -> origin\.test\.example:$ORIGIN_PORT policy=DIRECT rule=\"route\"" \
    "the flow line names origin.test.example: flow.host was set, route() said DIRECT"

say "HTTP proxy"
got=$(fetch_sha -x "http://127.0.0.1:$HTTP_PORT" "http://$f:$ORIGIN_PORT/small")
assert_eq "$SHA_SMALL" "$got" "the fake IP reaches the origin through the HTTP proxy"
got=$(fetch_sha -p -x "http://127.0.0.1:$HTTP_PORT" "http://$f:$ORIGIN_PORT/small")
assert_eq "$SHA_SMALL" "$got" "and through CONNECT"
for i in 1 2 3; do
    got=$(fetch_sha -x "socks5://127.0.0.1:$SOCKS_PORT" "http://$f:$ORIGIN_PORT/small")
    [ "$got" = "$SHA_SMALL" ] || fail "fetch $i: wrong body"
done
assert_eq 6 "$(wait_log_count "-> origin\\.test\\.example:$ORIGIN_PORT policy=DIRECT" 6)" "six flows to origin.test.example, all DIRECT"
dstats B
say "stats: resolver_queries=$B_resolver_queries resolver_sent=$B_resolver_sent resolver_cache_hits=$B_resolver_cache_hits"
check "six fetches, one resolution: dnsmasq saw origin.test.example A once"
assert_eq 1 "$(up_queries origin.test.example A)" "one A query upstream"
assert_ge 1 "$B_resolver_sent" "resolver_sent counts it"
check "resolver_sent is at most one query per family"
[ "$B_resolver_sent" -le 2 ] || fail "resolver_sent=$B_resolver_sent for six fetches"

say "a fake IP nobody was given"
rc=$(curl_rc -x "socks5://127.0.0.1:$SOCKS_PORT" "http://198.19.200.200:$ORIGIN_PORT/small")
check "refused (curl status $rc)"
[ "$rc" != 0 ] || fail "a fetch to an unmapped fake IP succeeded"
dstats C
assert_eq 1 "$C_dns_fake_misses" "dns_fake_misses counts it"
e2e_pass
