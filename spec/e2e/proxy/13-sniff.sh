#!/usr/bin/env bash
# SOCKS5 to an address (curl's socks5://, the client resolved the name):
# a route() that asks for flow.host gets it from the first bytes (HTTP
# Host, TLS SNI) after chute has answered "connected"; a REJECT then resets
# the connection. With socks5h:// the name comes in the request: no sniff.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start
bundle_write <<'LUA'
function chute.route(flow)
  if flow.host == "blocked.test" then return "REJECT" end
  return "DIRECT"
end
LUA
chute_start
SOCKS="socks5://127.0.0.1:$SOCKS_PORT"

say "socks5:// with Host: blocked.test: reset after the request was read"
rc=0
curl --silent --max-time 10 -o /dev/null -x "$SOCKS" -H "Host: blocked.test" \
    "http://127.0.0.1:$ORIGIN_PORT/small" || rc=$?
assert_match "^(52|56)$" "$rc" "curl's exit for a reset after connect, got $rc"
assert_log "tcp socks .* -> 127\.0\.0\.1:$ORIGIN_PORT host=blocked\.test policy=REJECT" \
    "the flow line names the sniffed host"

say "socks5:// with another Host: the held request reaches the origin whole"
got=$(fetch_sha -x "$SOCKS" -H "Host: fine.test" "http://127.0.0.1:$ORIGIN_PORT/small")
assert_eq "$SHA_SMALL" "$got" "the file through a sniffed SOCKS5 flow"
assert_log "tcp socks .* -> 127\.0\.0\.1:$ORIGIN_PORT host=fine\.test policy=DIRECT" "fine.test DIRECT"

say "TLS: the ClientHello's SNI decides"
out=$(python3 - "$SOCKS_PORT" "$ORIGIN_PORT" <<'PY'
import socket, ssl, sys
sp, op = int(sys.argv[1]), int(sys.argv[2])
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
res = []
for name in ("blocked.test", "fine.test"):
    s = socket.create_connection(("127.0.0.1", sp), timeout=5)
    s.sendall(b"\x05\x01\x00")
    s.recv(2)
    s.sendall(b"\x05\x01\x00\x01\x7f\x00\x00\x01" + op.to_bytes(2, "big"))
    s.recv(10)
    try:
        ctx.wrap_socket(s, server_hostname=name)
        res.append(f"{name}:handshake")
    except ConnectionResetError:
        res.append(f"{name}:reset")
    except (ssl.SSLError, OSError):
        res.append(f"{name}:tls-error")  # reached the origin, which speaks no TLS
print(" ".join(res))
PY
)
assert_eq "blocked.test:reset fine.test:tls-error" "$out" "SNI blocked.test reset, fine.test reached the origin"

say "socks5h:// carries the name: decided at once"
rc=0
curl --silent --max-time 10 -o /dev/null -x "socks5h://127.0.0.1:$SOCKS_PORT" \
    "http://blocked.test:$ORIGIN_PORT/small" || rc=$?
assert_eq 97 "$rc" "socks5h to blocked.test refused in the SOCKS5 reply"

chute_stop_within 5
e2e_pass
