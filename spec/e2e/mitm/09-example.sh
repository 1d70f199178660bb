#!/usr/bin/env bash
# examples/mitm as it ships (root, for the namespaces only): chute's HTTP
# and SOCKS5 listeners in the client namespace, www/api.example.* resolved
# to the test origin by a dnsmasq the namespace uses; the example's module
# and hooks rewrite what curl (trusting only chute's CA) fetches.
. "$(dirname "$0")/mitmlib.bash"
. "$(dirname "$0")/../dns/dnslib.bash"
need_root
need_cmd dnsmasq
netns_setup
ns_dns_cleanup_hook
servers_start http https
bg_in "$NS_SRV" "$NETNS_TMP/dnsmasq-ex.log" dnsmasq --keep-in-foreground --conf-file=/dev/null \
    --no-resolv --no-hosts --user=root --group=root --listen-address="$SRV4" --bind-interfaces \
    --port=53 --address=/example.com/"$SRV4" --address=/example.net/"$SRV4" \
    --pid-file="$NETNS_TMP/dnsmasq-ex.pid"
wait_file "$NETNS_TMP/dnsmasq-ex.pid" 10 || fail "dnsmasq did not start"
ns_resolv "$NS_CLI" "$SRV4"
printf '<html><title>Example Domain</title></html>\n' >"$WWW/index.html"
cp -r "$CHUTE_TOP/examples/mitm/." "$BUNDLE/"
export CHUTE_STATE_DIR=$NETNS_TMP/state SSL_CERT_FILE=$ORIGIN_CA
CHUTE_CA=$CHUTE_STATE_DIR/ca.pem
bg_in "$NS_CLI" "$CHUTE_LOG" "$CHUTE" run "$BUNDLE"
CHUTE_PID=$BG_PID
wait_tcp "$NS_CLI" 127.0.0.1 8080 10 || { chute_alive; fail "the example's HTTP proxy does not accept"; }
wait_file "$CHUTE_CA" 5 || fail "no CA made at $CHUTE_CA"
px() { ip netns exec "$NS_CLI" curl -sS --max-time 15 --cacert "$CHUTE_CA" -x http://127.0.0.1:8080 "$@"; }

out=$(px -i https://www.example.com/)
assert_match "Example Domain \\(via chute\\)" "$out" "[Body Rewrite] on www.example.com"
assert_match "[Xx]-[Rr]ewritten-[Bb]y: chute" "$out" "[Header Rewrite] on the response"
assert_match "[Xx]-[Ss]een-[Bb]y: chute" "$out" "the Lua response hook"
assert_match "x_chute=yes" "$(px https://www.example.com/echo)" "[Header Rewrite] on the request"
px -o /dev/null https://www.example.com/old/small
grep -q 'GET /new/small ' "$NETNS_TMP/tls-access.log" || fail "[URL Rewrite] header: the origin did not get /new/small"
assert_eq "302 https://www.example.com/" \
    "$(px -o /dev/null -w '%{http_code} %{redirect_url}' https://www.example.com/moved)" "[URL Rewrite] 302"
assert_eq '{"status":"ok"}' "$(px https://api.example.com/v1/status)" "[Map Local]"
assert_eq 204 "$(px -o /dev/null -w '%{http_code}' https://api.example.net/ads/x)" "chute.respond(204) from the hook"
assert_match "uri=/echo" "$(ip netns exec "$NS_CLI" curl -sS --max-time 15 --cacert "$CHUTE_CA" \
    -x socks5h://127.0.0.1:1080 https://www.example.com/echo)" "the SOCKS5 listener too"
check "a host not on the list keeps its own certificate"
ip netns exec "$NS_CLI" curl -sS --max-time 15 --cacert "$ORIGIN_CA" -x http://127.0.0.1:8080 \
    -o /dev/null https://other.example.com/small || fail "other.example.com through CONNECT, untouched"
chute_alive
pass
