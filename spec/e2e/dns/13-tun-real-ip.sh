#!/usr/bin/env bash
# real-ip through the TUN (root): queries entering the TUN are relayed to
# dnsmasq and answered with the real address (cached: a repeat does not
# reach dnsmasq), over UDP and TCP; once the client has resolved
# test.example, a later connection to that IP carries flow.host =
# "test.example" from the answer: route() passes it even though the HTTP
# Host header says otherwise, where before the lookup the same connection
# was rejected.
. "$(dirname "$0")/../netns.sh"
. "$(dirname "$0")/dnslib.bash"
need_root
need_cmd dig
netns_setup
ns_dns_cleanup_hook
servers_start http
ns_dnsmasq 60
ns_resolv "$NS_CLI" "$FAKE_RESOLVER"
tun_bundle "  dns = { mode = \"real-ip\", upstream = { \"$SRV4\" } }," <<'LUA'
function chute.route(flow)
  if flow.host == "test.example" then return "DIRECT" end
  return "REJECT"
end
LUA
tun_chute_start

say "before any lookup: the IP has no name"
rc=$(cli curl --silent --max-time 10 -o /dev/null -H "Host: wrong.example" "http://$SRV4/small" 2>/dev/null; echo $?) || true
rc=${rc##*$'\n'}
check "a connection to $SRV4 with Host wrong.example is rejected (curl status $rc)"
[ "$rc" != 0 ] || fail "it went through: route() does not tell names apart"

say "real answers through the TUN"
assert_eq "$SRV4" "$(cli dig @"$FAKE_RESOLVER" test.example A +short "${DIG_WAIT[@]}" 2>&1)" "dig through the TUN: dnsmasq's $SRV4"
assert_eq "$SRV4" "$(cli dig @"$FAKE_RESOLVER" test.example A +short "${DIG_WAIT[@]}" 2>&1)" "again (from chute's cache)"
assert_eq "$SRV4" "$(cli dig @"$FAKE_RESOLVER" test.example A +tcp +short "${DIG_WAIT[@]}" 2>&1)" "over TCP/53"
assert_eq 1 "$(ns_up_queries test.example A "$CLI4")" "dnsmasq was asked once: the repeats came from the cache"

say "the answer names the IP"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha -H "Host: wrong.example" "http://test.example/small")" \
    "curl http://test.example/small with Host wrong.example goes through: flow.host came from the DNS answer"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha -H "Host: wrong.example" "http://$SRV4:8080/small")" \
    "a later connection to $SRV4 (another port, by IP) carries the name too"
assert_eq 2 "$(wait_log_count "flow [0-9]+ tcp tun [0-9.]+:[0-9]+ -> ${SRV4//./\\.}:(80|8080) host=test\\.example policy=DIRECT" 2)" \
    "two flow lines: dst $SRV4, host=test.example, DIRECT"
stats_read
say "stats: dns_queries=$S_dns_queries dns_forwarded=$S_dns_forwarded dns_fake=$S_dns_fake resolver_sent=$S_resolver_sent resolver_cache_hits=$S_resolver_cache_hits"
assert_eq 0 "$S_dns_fake" "no fake answers in real-ip mode"
assert_ge 1 "$S_resolver_cache_hits" "resolver_cache_hits counted"
e2e_pass
