#!/usr/bin/env bash
# IPv6 through the TUN: curl -6 to [fd20::2] is captured (auto_route's v6
# rule), terminated in lwIP and relayed from chute's marked v6 socket.
. "$(dirname "$0")/../netns.sh"
need_root
tun_env_up http
assert_routed_via_tun "$SRV6"

check "GET /small over IPv6 through the TUN"
body=$(cli_curl -6 --fail --max-time 10 "http://[$SRV6]/small") || fail "curl -6 /small failed"
assert_eq "hello from the tun e2e server" "$body" "the small body over v6"
assert_log "flow [0-9]+ tcp tun \[fdfe::1\]:[0-9]+ -> \[$SRV6\]:$HTTP_PORT policy=DIRECT $RULE_RE up=[0-9]+ down=[0-9]+ .*close=done" \
    "the v6 flow line: from the TUN's v6 address to [$SRV6]:$HTTP_PORT"

check "1 MiB over IPv6, digest equal"
assert_eq "$SHA_1M" "$(cli_fetch_sha -6 "http://[$SRV6]/1m.bin")" "1m.bin's sha256 over v6"
assert_eq 1 "$(flows_down_ge "-> \[$SRV6\]:$HTTP_PORT " 1048576 1)" "one v6 flow with down >= 1 MiB"

check "the server saw chute's upstream: from $CLI6 (veth0), not from the TUN's fdfe::1"
wait_file "$NETNS_TMP/access.log" 5 || fail "nginx logged nothing"
assert_eq 2 "$(grep -c "^$CLI6 GET " "$NETNS_TMP/access.log")" "requests from $CLI6 in nginx's log"
assert_eq 0 "$(grep -c "^fdfe::" "$NETNS_TMP/access.log" || true)" "requests from fdfe:: in nginx's log"

check "a v6 connection to the second port (:$ALT_PORT) too"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha -6 "http://[$SRV6]:$ALT_PORT/small")" "small over v6 :$ALT_PORT"

stats_read
assert_eq 3 "$S_tcp_total" "three TUN TCP connections"
assert_decided_once
chute_alive
pass
