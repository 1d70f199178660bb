#!/usr/bin/env bash
# fake-ip with fake_ip_range6 through the TUN (root): a query sent to an
# IPv6 resolver address is answered over IPv6, AAAA gets a fake address
# from the v6 range (same slot as the A), `curl -6 http://test.example/`
# connects to it and the flow reaches nginx by name (DIRECT resolves the
# name: dnsmasq has only an A record). Big answers through the TUN: a
# 3,000-byte TXT asked with a 4096-byte EDNS buffer still arrives (or is
# truncated to what the TUN's MTU carries), never silence.
. "$(dirname "$0")/../netns.sh"
. "$(dirname "$0")/dnslib.bash"
need_root
need_cmd dig
netns_setup
ns_dns_cleanup_hook
servers_start http
txt=()
for i in $(seq 12); do txt+=("$(printf "s%02d-" "$i")$(head -c 246 /dev/zero | tr '\0' x)"); done
ns_dnsmasq 60 "--txt-record=big.test.example,$(IFS=,; echo "${txt[*]}")"
R6=2001:db8::53
ns_resolv "$NS_CLI" "$R6"
tun_bundle "  dns = { upstream = { \"$SRV4\" }, persist = false, fake_ip_range6 = \"fc00::/18\" }," <<'LUA'
function chute.route(flow)
  if flow.host == "test.example" then return "DIRECT" end
  return "REJECT"
end
LUA
tun_chute_start

a6=$(cli dig @"$R6" test.example AAAA +short "${DIG_WAIT[@]}" 2>&1)
assert_in_net "$a6" fc00::/18 "AAAA asked over IPv6 through the TUN: a fake IPv6 address ($a6)"
a4=$(cli dig @"$R6" test.example A +short "${DIG_WAIT[@]}" 2>&1)
assert_in_net "$a4" 198.18.0.0/15 "A: a fake IPv4 address ($a4)"
check "the A and the AAAA share the slot"
o4=$(python3 -c 'import ipaddress,sys; print(int(ipaddress.ip_address(sys.argv[1])) - int(ipaddress.ip_address("198.18.0.0")))' "$a4")
o6=$(python3 -c 'import ipaddress,sys; print(int(ipaddress.ip_address(sys.argv[1])) - int(ipaddress.ip_address("fc00::")))' "$a6")
[ "$o4" = "$o6" ] || fail "offsets differ: $a4 ($o4) and $a6 ($o6)"
assert_eq "$a6" "$(cli dig @"$R6" test.example AAAA +tcp +short "${DIG_WAIT[@]}" 2>&1)" "the same over TCP/53 on IPv6"

assert_eq "$SHA_SMALL" "$(cli_fetch_sha -6 "http://test.example/small")" "curl -6 http://test.example/small: the file's sha256"
assert_log "flow [0-9]+ tcp tun \[fdfe::1\]:[0-9]+ -> test\\.example:80 policy=DIRECT $RULE_RE" \
    "the flow from the TUN's IPv6 address is named test.example"

say "a big answer through the TUN (MTU 1500)"
full=$(cli dig @"$R6" big.test.example TXT +bufsize=4096 +ignore "${DIG_WAIT[@]}" 2>&1) || true
check "EDNS 4096, UDP only: an answer comes (complete or truncated)"
assert_match "status: NOERROR" "$full" "NOERROR"
n=$(grep -o -E 's[0-9]{2}-x{246}' <<<"$full" | sort -u | wc -l || true)
if grep -q -E "flags: qr[a-z ]* tc" <<<"$full"; then
    say "truncated to fit the TUN (TC set, $n strings)"
    assert_match "MSG SIZE  rcvd: ([0-9]{1,3}|1[0-3][0-9][0-9]|14[0-4][0-9])$" "$full" "the truncated answer fits the MTU"
else
    assert_eq 12 "$n" "not truncated, so complete: 12 strings"
fi
full=$(cli dig @"$FAKE_RESOLVER" big.test.example TXT +bufsize=4096 "${DIG_WAIT[@]}" 2>&1) || true
assert_eq 12 "$(grep -o -E 's[0-9]{2}-x{246}' <<<"$full" | sort -u | wc -l)" "dig (TCP retry allowed) gets all 12 strings over IPv4"
e2e_pass
