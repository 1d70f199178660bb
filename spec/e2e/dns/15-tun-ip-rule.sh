#!/usr/bin/env bash
# IP rules on fake-IP flows through the TUN (root; issue 13): curl asks for
# test.example and gets a fake IP from chute; the flow is named, and the
# IP-CIDR rule for the server's real address (without no-resolve) resolves
# the name through chute's resolver (dnsmasq's real answer, not the fake
# IP) and rejects the flow. The same rule with no-resolve skips the name
# and the file arrives; an address literal matches and never resolves. UDP
# to the fake IP waits for the resolution the same way.
. "$(dirname "$0")/../netns.sh"
. "$(dirname "$0")/dnslib.bash"
need_root
need_cmd dig
netns_setup
ns_dns_cleanup_hook
servers_start http udp
ns_dnsmasq 60
ns_resolv "$NS_CLI" "$FAKE_RESOLVER"

rules_bundle() { # OPTION: "" or ', "no-resolve"'
    tun_bundle "  dns = { upstream = { \"$SRV4\" }, persist = false }," <<LUA
chute.route = chute.rules {
  {"IP-CIDR", "$SRV4/32", "REJECT"$1},
  {"FINAL", "DIRECT"},
}
LUA
}

rules_bundle ""
tun_chute_start
say "test.example resolves (for the rule) into $SRV4/32: rejected"
f=$(cli dig test.example A +short "${DIG_WAIT[@]}" 2>&1)
assert_in_net "$f" 198.18.0.0/15 "the client got a fake IP ($f)"
rc=$(cli curl --silent --max-time 10 -o /dev/null "http://test.example/small" 2>/dev/null; echo $?) || true
[ "${rc##*$'\n'}" != 0 ] || fail "the named flow went through: the IP rule did not resolve it"
assert_eq 1 "$(wait_log_count "tcp tun [0-9.]+:[0-9]+ -> test\\.example:80 policy=REJECT rule=\"route rule 1 IP-CIDR,${SRV4//./\\.}/32\"" 1)" \
    "the flow line: test.example, REJECT by rule 1"
assert_log "tcp tun .* -> test\.example:80 policy=REJECT .*close=rejected" "closed as rejected (a reset)"
udp_echo() { # ADDR: how many of five datagrams the echo server returned
    cli_py "$1" "$ECHO_PORT" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((sys.argv[1], int(sys.argv[2])))
s.settimeout(1)
ok = 0
for i in range(5):
    try:
        s.send(b"ping %d" % i)
        ok += s.recv(100) == b"ping %d" % i
    except (socket.timeout, ConnectionRefusedError):
        pass
print(f"echoed={ok}")
PY
}
say "UDP to the fake IP: resolved for the rule, rejected"
assert_eq "echoed=0" "$(udp_echo "$f")" "no datagram comes back"
chute_stop_within 5
assert_log "udp tun .* -> test\.example:$ECHO_PORT policy=REJECT rule=\"route rule 1 " \
    "the UDP flow line: REJECT by rule 1"
assert_log "stats .* rule_resolves=2( |\$)" "one resolution each for the TCP and the UDP flow"
assert_eq 0 "$(grep -c "tcp tun .* -> test\\.example:80 policy=DIRECT" "$CHUTE_LOG" || true)" \
    "no DIRECT flow to the name (the fake IP was never taken for the address)"

rules_bundle ', "no-resolve"'
tun_chute_start
say "with no-resolve the rule skips the name: the file arrives"
f=$(cli dig test.example A +short "${DIG_WAIT[@]}" 2>&1)
got=$(cli_fetch_sha "http://test.example/small")
assert_eq "$SHA_SMALL" "$got" "curl http://test.example/small through FINAL DIRECT"
assert_eq "echoed=5" "$(udp_echo "$f")" "UDP to the fake IP: all five datagrams come back"
say "an address literal matches the rule and never resolves"
rc=$(cli curl --silent --max-time 10 -o /dev/null "http://$SRV4/small" 2>/dev/null; echo $?) || true
[ "${rc##*$'\n'}" != 0 ] || fail "http://$SRV4/ went through: the IP rule did not match it"
chute_stop_within 5
assert_log "stats .* rule_resolves=0( |\$)" "no resolution for IP rules"
e2e_pass
