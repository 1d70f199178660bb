#!/usr/bin/env bash
# A TLS proxy pointed at a plain port says so. The Trojan proxy "plain"
# names nginx's plain HTTP port: nginx answers the ClientHello with an
# HTTP 400, which BearSSL calls error 3 (a bad record version). chute says
#   tls: the server did not speak TLS (got bytes that are not a TLS record: is this a plain port?)
# for the flow, counts the failed handshake (tls_failures), and with
# --log-level debug logs the handshake's end with the time it took. A
# real Trojan server beside it ("tj") logs its handshakes at debug with
# the suite, ALPN and whether the session was resumed (the second is).
. "$(dirname "$0")/outlib.bash"
need_root
netns_setup
servers_start http
trojan_start 8443 "pw"

tun_bundle <<LUA
chute.proxy "plain" { type = "trojan", server = "$SRV4", port = $HTTP_PORT, password = "pw",
                      sni = "trojan.test", pool = false }
chute.proxy "tj" { type = "trojan", server = "$SRV4", port = 8443, password = "pw",
                   sni = "trojan.test", skip_cert_verify = true, pool = false }
function chute.route(flow)
  if flow.dst_port == $HTTP_PORT then return "tj" end
  return "plain"
end
LUA
CHUTE_RUN_ARGS="--log-level debug" tun_chute_start

stats_read A
check "a flow through the plain port fails at once, with the reason"
rc=$(cli_curl -o /dev/null --max-time 5 "http://$SRV4:$ALT_PORT/small" >/dev/null 2>&1; echo $?)
[ "$rc" != 0 ] || fail "curl through a TLS proxy on a plain port succeeded"
why="tls: the server did not speak TLS \(got bytes that are not a TLS record: is this a plain port\?\)"
wait_log "flow [0-9]+: connect $SRV4:$ALT_PORT: $why$" 5 ||
    fail "no line with the reason: $(grep -E "flow [0-9]+: connect" "$CHUTE_LOG" | tail -n 1)"
assert_log "policy=plain .*close=connect failed" "the flow's line"
assert_no_log "BearSSL error" "no bare BearSSL error number"
assert_log "debug tls: client handshake with '$SRV4' failed after [0-9]+ ms: $why" "the handshake's end at debug"
stats_read B
assert_ge $((A_tls_failures + 1)) "$B_tls_failures" "tls_failures counts the handshake"

check "a real Trojan server: its handshakes at debug, the second one resumed"
for i in 1 2; do
    assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 5 "http://$SRV4:$HTTP_PORT/small")" "fetch $i through tj"
done
hs="debug tls: client handshake with '$SRV4' done in [0-9]+ ms: TLS 1\.2 ECDHE-RSA-[A-Z0-9-]+, alpn none"
assert_log "$hs, new session$" "the first handshake"
assert_log "$hs, session resumed$" "the second handshake resumed"

chute_alive
pass
