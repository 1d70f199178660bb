#!/usr/bin/env bash
# fake-ip through the TUN (root): the client namespace's resolver is
# 192.0.2.53, where nothing listens: chute answers every query to port 53
# that enters the TUN, over UDP and TCP. `curl http://test.example/` there
# resolves through chute to a fake IP and reaches nginx in the server
# namespace; route() lets the flow through only if flow.host is
# "test.example", the flow line shows the name, and chute resolved the
# real address once (upstream dnsmasq, TTL 60) for several fetches: the
# client's own queries never left chute. UDP to a fake IP is named and
# relayed too (the echo server answers, the flow line shows the name).
. "$(dirname "$0")/../netns.sh"
. "$(dirname "$0")/dnslib.bash"
need_root
need_cmd dig
netns_setup
ns_dns_cleanup_hook
servers_start http udp
ns_dnsmasq 60
ns_resolv "$NS_CLI" "$FAKE_RESOLVER"
tun_bundle "  dns = { upstream = { \"$SRV4\" }, persist = false }," <<'LUA'
function chute.route(flow)
  if flow.host == "test.example" then return "DIRECT" end
  return "REJECT"
end
LUA
tun_chute_start

say "queries through the TUN"
f=$(cli dig @"$FAKE_RESOLVER" test.example A +short "${DIG_WAIT[@]}" 2>&1)
assert_in_net "$f" 198.18.0.0/15 "dig @$FAKE_RESOLVER test.example through the TUN: a fake IP ($f)"
assert_eq "$f" "$(cli dig test.example A +short "${DIG_WAIT[@]}" 2>&1)" "the same from the namespace's resolv.conf"
assert_eq "$f" "$(cli dig @"$FAKE_RESOLVER" test.example A +tcp +short "${DIG_WAIT[@]}" 2>&1)" "the same over TCP/53 through the TUN"
assert_eq "$f" "$(cli dig @"$SRV4" test.example A +tcp +short "${DIG_WAIT[@]}" 2>&1)" "TCP/53 to dnsmasq's own address is answered by chute too"
assert_eq "" "$(cli dig @"$FAKE_RESOLVER" test.example AAAA +short "${DIG_WAIT[@]}" 2>&1)" "AAAA: none (no fake_ip_range6)"
assert_eq 0 "$(grep -c 'query\[' "$NS_DNS_LOG" || true)" "dnsmasq saw none of these queries"

say "curl by name"
got=$(cli_fetch_sha "http://test.example/small")
assert_eq "$SHA_SMALL" "$got" "curl http://test.example/small: the file's sha256"
for i in 1 2 3; do
    got=$(cli_fetch_sha "http://test.example/1m.bin")
    [ "$got" = "$SHA_1M" ] || fail "fetch $i of 1m.bin: wrong sha256"
done
assert_eq 4 "$(wait_log_count "flow [0-9]+ tcp tun [0-9.]+:[0-9]+ -> test\\.example:80 policy=DIRECT $RULE_RE" 4)" \
    "four flow lines with dst test.example:80, DIRECT by route() (flow.host was the name)"
assert_eq 4 "$(grep -c "GET /.* 200 .*srv=$SRV4:80" "$NETNS_TMP/access.log")" "nginx served four requests"
stats_read
say "stats: dns_queries=$S_dns_queries dns_fake=$S_dns_fake resolver_queries=$S_resolver_queries resolver_sent=$S_resolver_sent resolver_cache_hits=$S_resolver_cache_hits dns_fake_misses=$S_dns_fake_misses"
assert_eq 1 "$(ns_up_queries test.example A "$CLI4")" "chute resolved test.example A upstream exactly once for four fetches"
check "resolver_sent: one query per family at most ($S_resolver_sent)"
[ "$S_resolver_sent" -ge 1 ] && [ "$S_resolver_sent" -le 2 ] || fail "resolver_sent=$S_resolver_sent"
assert_eq 0 "$S_dns_fake_misses" "no fake IP without a name"

say "UDP to a fake IP"
out=$(cli_py "$f" "$ECHO_PORT" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((sys.argv[1], int(sys.argv[2])))
s.settimeout(3)
ok = 0
for i in range(5):
    s.send(b"ping %d" % i)
    try:
        ok += s.recv(100) == b"ping %d" % i
    except socket.timeout:
        pass
print(f"echoed={ok}")
PY
)
assert_eq "echoed=5" "$out" "five datagrams to $f:$ECHO_PORT come back from the echo server"
chute_stop_within 5
assert_eq 1 "$(flow_lines "udp tun [0-9.]+:[0-9]+ -> test\.example:$ECHO_PORT policy=DIRECT $RULE_RE up=30 down=30 " | wc -l)" \
    "the UDP flow line: dst test.example:$ECHO_PORT, 30 bytes each way"
tun_chute_start

say "route() really reads flow.host"
rc=$(cli curl --silent --max-time 10 -o /dev/null -H "Host: other.example" "http://$SRV4/small" 2>/dev/null; echo $?) || true
check "an IP flow whose Host is not test.example is rejected (curl status ${rc##*$'\n'})"
[ "${rc##*$'\n'}" != 0 ] || fail "the control fetch went through: route() does not tell names apart"
e2e_pass
