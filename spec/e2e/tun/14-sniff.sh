#!/usr/bin/env bash
# A TUN flow arrives as a bare address; a route() that asks for flow.host
# gets it from the flow's first bytes (TLS SNI, HTTP Host): chute accepts
# the connection, holds the first bytes, decides with the name, then
# connects and sends them on. Flows whose script never reads the host are
# not held (and route() runs once for them).
. "$(dirname "$0")/../netns.sh"
need_root
netns_setup
servers_start http
tun_bundle <<'LUA'
function chute.route(flow)
  if flow.dst_port == 8080 then return "DIRECT" end -- never reads the host
  if flow.host == "blocked.test" then return "REJECT" end
  return "DIRECT"
end
LUA
tun_chute_start

check "HTTP with Host: blocked.test is refused after the request was read"
rc=0
cli_curl --max-time 5 -o /dev/null -H "Host: blocked.test" "http://$SRV4/small" || rc=$?
assert_match "^(52|56)$" "$rc" "curl sees the connection reset (exit 52/56), got $rc"
assert_log "tcp tun .* -> $SRV4:80 host=blocked\\.test policy=REJECT" "the flow line names the sniffed host"

check "HTTP with another Host passes, the held request reaches the server whole"
body=$(cli_curl --fail --max-time 5 -H "Host: fine.test" "http://$SRV4/small") || fail "curl failed"
assert_eq "hello from the tun e2e server" "$body" "the body through the sniffed flow"
assert_log "tcp tun .* -> $SRV4:80 host=fine\\.test policy=DIRECT" "fine.test went DIRECT"

check "TLS: the ClientHello's SNI decides"
out=$(cli_py "$SRV4" <<'PY'
import socket, ssl, sys
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
res = []
for name in ("blocked.test", "fine.test"):
    s = socket.create_connection((sys.argv[1], 80), timeout=5)
    try:
        ctx.wrap_socket(s, server_hostname=name)
        res.append(f"{name}:handshake")
    except ConnectionResetError:
        res.append(f"{name}:reset")
    except (ssl.SSLError, OSError) as e:
        res.append(f"{name}:tls-error")  # reached nginx, which speaks no TLS on :80
print(" ".join(res))
PY
)
assert_eq "blocked.test:reset fine.test:tls-error" "$out" "SNI blocked.test reset, fine.test reached the server"

check "a flow whose script does not ask for the host is not held"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha "http://$SRV4:$ALT_PORT/small")" "small via :$ALT_PORT"
stats_read
say "sniffed=$S_sniffed route_calls=$S_route_calls flows_total=$S_flows_total"
assert_eq 4 "$S_sniffed" "four flows named from their first bytes (two Host, two SNI)"
assert_eq 5 "$S_flows_total" "five flows"
assert_eq 5 "$S_route_calls" "each flow decided once (the held ones once named; the trial call does not count)"
chute_alive
pass
