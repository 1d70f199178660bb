#!/usr/bin/env bash
# Fake IPs outlive a chute restart through the TUN (root): a client that
# kept the old fake IP of test.example connects to it (curl to the IP, Host
# header) after the restart, and the flow still has its name (route()
# passes only flow.host == "test.example", the flow line shows the name).
# The control: restarted without a state file, the same connection is
# refused at once and counted as a fake-IP miss.
. "$(dirname "$0")/../netns.sh"
. "$(dirname "$0")/dnslib.bash"
need_root
need_cmd dig
netns_setup
ns_dns_cleanup_hook
servers_start http
ns_dnsmasq 60
STATE=$NETNS_TMP/fakeip.state
bundle() { # DNS_EXTRA
    tun_bundle "  dns = { upstream = { \"$SRV4\" }, $1 }," <<'LUA'
function chute.route(flow)
  if flow.host == "test.example" then return "DIRECT" end
  return "REJECT"
end
LUA
}
bundle "state_file = \"$STATE\""
tun_chute_start

# A few other names first, so test.example's address is not the first one.
for n in a b c; do cli dig @"$FAKE_RESOLVER" "$n.test.example" A +short "${DIG_WAIT[@]}" >/dev/null; done
f=$(cli dig @"$FAKE_RESOLVER" test.example A +short "${DIG_WAIT[@]}" 2>&1)
assert_in_net "$f" 198.18.0.0/15 "test.example: a fake IP ($f)"
fetch() { cli_fetch_sha -H "Host: test.example" "http://$f/small"; }
assert_eq "$SHA_SMALL" "$(fetch)" "curl to $f with Host test.example, before the restart"

say "restart with the state file"
chute_stop_within 5
grep -q -E "^${f//./\\.} test\.example$" "$STATE" || fail "no '$f test.example' line in the state file"
tun_chute_start
assert_eq "$SHA_SMALL" "$(fetch)" "the same curl to the old fake IP after the restart"
assert_log "flow [0-9]+ tcp tun [0-9.]+:[0-9]+ -> test\\.example:80 policy=DIRECT $RULE_RE" \
    "after the restart the flow to $f is named test.example"
assert_eq "$f" "$(cli dig @"$FAKE_RESOLVER" test.example A +short "${DIG_WAIT[@]}" 2>&1)" "and the name still maps to $f"
stats_read
assert_eq 0 "$S_dns_fake_misses" "no fake-IP miss"
chute_stop_within 5

say "control: restart without the state file"
bundle "persist = false"
tun_chute_start
rc=$(cli curl --silent --max-time 10 -o /dev/null -H "Host: test.example" "http://$f/small" 2>/dev/null; echo $?) || true
rc=${rc##*$'\n'}
check "without the state, the old fake IP leads nowhere (curl status $rc)"
[ "$rc" != 0 ] || fail "the fetch to $f worked without the state file: the test proves nothing"
stats_read
assert_eq 1 "$S_dns_fake_misses" "dns_fake_misses counts the flow to an unmapped fake IP"
e2e_pass
