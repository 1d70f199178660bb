#!/usr/bin/env bash
# The MITM on every inbound (root): the SOCKS5 listener (curl resolving,
# chute reading the SNI; and socks5h), the HTTP listener's CONNECT, the
# reverse-proxy listener; pipelined requests answered in order; a
# WebSocket echo through the MITM after its 101; a Surge module with every
# section it runs; a hook that errors and one that never returns: the
# request passes unmodified and the engine keeps serving.
. "$(dirname "$0")/mitmlib.bash"
need_root
SOCKS=1080
HTTPP=8080
REV=9443
mitm_env_up "  listen = { socks = \"127.0.0.1:$SOCKS\", http = \"127.0.0.1:$HTTPP\",
             reverse = { \"127.0.0.1:$REV -> https://test.example:443\" } },
  dns = { upstream = { \"$SRV4\" }, persist = false },
  mitm = { hosts = { \"test.example\", \"test.example:7443\", \"test.example:8443\",
                     \"test.example:8444\" }, skip_verify_hosts = { \"test.example:8443\" } }," <<'LUA'
chute.module { name = "inline", text = [[
[URL Rewrite]
^https://test\.example/old/(.*) https://test.example/$1 header
^https://test\.example/moved https://test.example/small 302
^https://test\.example/elsewhere/(.*) https://sub.test.example/$1 header
[Header Rewrite]
http-request ^https://test\.example/echo header-add X-Chute module
http-response ^https://test\.example/small header-add X-Module yes
[Map Local]
^https://test\.example/mock data-type=text data="mocked" status-code=201
[Body Rewrite]
http-response ^https://test\.example/small hello HOLA
[Script]
js = type=http-request,pattern=^https://x,script-path=x.js
]] }
chute.on_request([[^https://test\.example/echo\?err$]], function(req)
  req.headers["x-chute"] = "partial"
  error("boom")
end)
chute.on_request([[^https://test\.example/echo\?spin$]], function(req)
  while true do end
end)
function chute.route(flow)
  return "DIRECT"
end
LUA
wait_log "\\[Script\\]" 5 || fail "the module's [Script] section was not listed at load"
lcurl() {
    ip netns exec "$NS_CLI" curl --silent --show-error --max-time 20 --cacert "$CHUTE_CA" "$@"
}

say "SOCKS5 (the client resolved; chute reads the SNI) and socks5h (the name in the request)"
assert_match "x_chute=module" "$(lcurl -x "socks5://127.0.0.1:$SOCKS" --resolve "test.example:443:$SRV4" \
    https://test.example/echo)" "SOCKS5 with an address"
assert_match "x_chute=module" "$(lcurl -x "socks5h://127.0.0.1:$SOCKS" https://test.example/echo)" \
    "SOCKS5 with the name"
say "HTTP CONNECT"
assert_match "x_chute=module" "$(lcurl -x "http://127.0.0.1:$HTTPP" https://test.example/echo)" "CONNECT"
say "the reverse listener"
assert_match "x_chute=module" "$(lcurl --resolve "test.example:$REV:127.0.0.1" \
    "https://test.example:$REV/echo")" "reverse proxy to test.example:443"

say "the Surge module"
out=$(mcurl -i https://test.example/small)
assert_match "HOLA from the tun e2e server" "$out" "Body Rewrite"
assert_match "[Xx]-[Mm]odule: yes" "$out" "Header Rewrite on the response"
assert_match "uri=/echo" "$(mcurl https://test.example/old/echo)" "URL Rewrite (header)"
assert_eq "302 https://test.example/small" \
    "$(mcurl -o /dev/null -w '%{http_code} %{redirect_url}' https://test.example/moved)" "URL Rewrite 302"
assert_match "host=sub.test.example" "$(mcurl https://test.example/elsewhere/echo)" \
    "URL Rewrite to another origin: a connection of its own, the same policy"
assert_eq "201 mocked" "$(mcurl -w '%{http_code} ' -o "$NETNS_TMP/mock" https://test.example/mock; cat "$NETNS_TMP/mock")" \
    "Map Local"
grep -q ' /mock ' "$NETNS_TMP/tls-access.log" && fail "Map Local let the request through"

say "skip_verify_hosts: an origin chute cannot verify, on the user's say-so"
wait_log "certificate checks are off for origins matching \"test.example:8443\"" 5 ||
    fail "skip_verify_hosts is not warned at load"
assert_match "hello" "$(mcurl https://test.example:8443/small)" "the self-signed origin through the MITM"
say "an origin that speaks only TLS 1.3: passed through uninspected, logged"
ip netns exec "$NS_CLI" curl -sS --max-time 10 --cacert "$ORIGIN_CA" --resolve "test.example:8444:$SRV4" \
    -o /dev/null https://test.example:8444/small || fail "the TLS 1.3-only origin, with its own certificate"
wait_log "test\\.example:8444 speaks only TLS 1\\.3: passed through uninspected" 5 ||
    fail "the pass-through is not logged"

say "pipelining: three requests in one write, answered in order"
ip netns exec "$NS_CLI" "$PY" - "$SRV4" "$CHUTE_CA" >"$NETNS_TMP/pipe.out" <<'PY'
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[2])
c = ctx.wrap_socket(socket.create_connection((sys.argv[1], 443), timeout=10), server_hostname="test.example")
req = "".join("GET /echo?n=%d HTTP/1.1\r\nHost: test.example\r\n\r\n" % i for i in (1, 2))
req += "GET /echo?n=3 HTTP/1.1\r\nHost: test.example\r\nConnection: close\r\n\r\n"
c.sendall(req.encode())
buf = b""
while True:
    d = c.recv(65536)
    if not d:
        break
    buf += d
print(buf.decode(errors="replace"))
PY
order=$(grep -o 'uri=/echo?n=[0-9]' "$NETNS_TMP/pipe.out" | tr -d '\n')
assert_eq "uri=/echo?n=1uri=/echo?n=2uri=/echo?n=3" "$order" "three answers, in order"

say "a WebSocket echo through the MITM"
bg_in "$NS_SRV" "$NETNS_TMP/ws.log" "$PY" "$(dirname "$0")/ws_echo.py" "$SRV4" 7443 \
    "$NETNS_TMP/pki/leaf.pem" "$NETNS_TMP/pki/leaf.key" "$NETNS_TMP/ws.ready"
wait_file "$NETNS_TMP/ws.ready" 10 || fail "the WebSocket server did not start"
ws=$(ip netns exec "$NS_CLI" "$PY" "$(dirname "$0")/ws_client.py" "$SRV4" 7443 test.example \
    "$CHUTE_CA" "ping through chute")
assert_match "^HTTP/1.1 101" "$ws" "101 Switching Protocols reached the client"
assert_match "^ping through chute$" "$ws" "the frame came back through the tunnel"

say "a hook that errors, a hook that never returns: the request passes as it came"
out=$(mcurl "https://test.example/echo?err")
assert_match "uri=/echo\\?err x_chute=module " "$out" "after an error: the module's edit only, the hook's dropped"
wait_log "boom" 5 || fail "the hook's error is not logged"
out=$(mcurl "https://test.example/echo?spin")
assert_match "uri=/echo\\?spin x_chute=module " "$out" "a runaway hook is cut and the request goes on"
wait_log "budget" 5 || fail "the budget cut is not logged"
assert_match "HOLA" "$(mcurl https://test.example/small)" "chute keeps serving"
stats_read
assert_ge 1 "$S_hook_errors" "hook_errors"
assert_ge 1 "$S_hook_budget_cuts" "hook_budget_cuts"
chute_alive
pass
