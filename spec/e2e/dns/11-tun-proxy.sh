#!/usr/bin/env bash
# fake-ip through the TUN with the flow routed to a SOCKS5 proxy (root):
# curl http://test.example/ in the client namespace resolves through chute
# to a fake IP; route() sends flows whose flow.host is "test.example" to
# microsocks in the server namespace, which gets the name and resolves it
# itself. chute resolves nothing: resolver_sent stays 0 and dnsmasq never
# hears from the client namespace, while the fetches work.
. "$(dirname "$0")/../netns.sh"
. "$(dirname "$0")/dnslib.bash"
need_root
need_cmd dig microsocks
netns_setup
ns_dns_cleanup_hook
servers_start http
ns_dnsmasq 60
ns_resolv "$NS_CLI" "$FAKE_RESOLVER"
ns_resolv "$NS_SRV" "$SRV4" # microsocks resolves test.example with dnsmasq
S5_PORT=1080
bg_in "$NS_SRV" "$NETNS_TMP/microsocks.log" microsocks -i "$SRV4" -p "$S5_PORT"
wait_tcp "$NS_SRV" "$SRV4" "$S5_PORT" 10 || fail "microsocks did not start"
tun_bundle "  dns = { upstream = { \"$SRV4\" }, persist = false }," <<LUA
chute.proxy "s5" { type = "socks5", server = "$SRV4", port = $S5_PORT }
function chute.route(flow)
  if flow.host == "test.example" then return "s5" end
  return "REJECT"
end
LUA
tun_chute_start

f=$(cli dig test.example A +short "${DIG_WAIT[@]}" 2>&1)
assert_in_net "$f" 198.18.0.0/15 "test.example resolves to a fake IP through chute ($f)"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha "http://test.example/small")" "curl http://test.example/small via s5: the file's sha256"
for i in 1 2 3; do
    got=$(cli_fetch_sha "http://test.example/1m.bin")
    [ "$got" = "$SHA_1M" ] || fail "fetch $i of 1m.bin: wrong sha256"
done
assert_eq 4 "$(wait_log_count "flow [0-9]+ tcp tun [0-9.]+:[0-9]+ -> test\\.example:80 policy=s5 $RULE_RE" 4)" \
    "four flow lines: dst test.example:80, policy s5"
check "nginx saw the requests come from the proxy's side ($SRV4)"
assert_eq 4 "$(grep -c "^$SRV4 GET /.* 200 " "$NETNS_TMP/access.log")" "four requests from $SRV4"
stats_read
say "stats: dns_queries=$S_dns_queries dns_fake=$S_dns_fake resolver_queries=$S_resolver_queries resolver_sent=$S_resolver_sent"
assert_eq 0 "$S_resolver_sent" "resolver_sent = 0: nothing was resolved locally"
assert_eq 0 "$S_resolver_queries" "resolver_queries = 0"
assert_eq 0 "$(grep -c "from $CLI4" "$NS_DNS_LOG" || true)" "dnsmasq got no query from the client namespace"
assert_ge 1 "$(ns_up_queries test.example A "$SRV4")" "microsocks resolved test.example itself"
e2e_pass
