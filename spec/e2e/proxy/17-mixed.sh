#!/usr/bin/env bash
# listen.mixed: SOCKS5 and HTTP proxy (absolute-URI forwarding and CONNECT)
# on one port, told apart by the first byte, with the same auth table for
# both. SOCKS4, a TLS handshake and a control byte are refused with a line
# naming what came, and the next client is served. A mixed port on the
# socks port is refused at load with both addresses named. The shipped
# examples/default, on this test's ports, serves both over its mixed port.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start
MIXED_PORT=$SOCKS_PORT
read -r CTL_PORT <<<"$(e2e_ports 1)"
cat >"$BUNDLE/main.lua" <<LUA
local chute = require "chute"
chute.config {
  listen = { mixed = { address = "127.0.0.1:$MIXED_PORT", users = { alice = "s3cret" } } },
  timeouts = { connect = 2 },
  control = { listen = "127.0.0.1:$CTL_PORT" },
}
function chute.route(flow)
  return "DIRECT"
end
LUA
CHUTE_LOG=$E2E_TMP/chute.log
"$CHUTE" run "$BUNDLE" 2>"$CHUTE_LOG" &
CHUTE_PID=$!
wait_port 127.0.0.1 "$MIXED_PORT" 10 || { chute_alive; fail "the mixed listener does not accept"; }
assert_log "listening: mixed \(socks5\+http\) on 127\.0\.0\.1:$MIXED_PORT \(auth\)" "the listener says what it serves"

check "GET /configs tells a Clash dashboard the mixed-port"
cfg=$(curl -s --max-time 5 "http://127.0.0.1:$CTL_PORT/configs")
assert_eq "$MIXED_PORT 0 0" "$(python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["mixed-port"], j["socks-port"], j["port"])' <<<"$cfg")" \
    "mixed-port, socks-port, port in $cfg"
O="http://127.0.0.1:$ORIGIN_PORT"
P=alice:s3cret@127.0.0.1:$MIXED_PORT

say "SOCKS5 (curl --socks5-hostname) through the mixed port"
got=$(fetch_sha --socks5-hostname "$P" "$O/1m.bin")
assert_eq "$SHA_1M" "$got" "sha256 of 1 MiB over SOCKS5 equals the file's"
assert_log "flow [0-9]+ tcp socks 127\.0\.0\.1:[0-9]+ -> 127\.0\.0\.1:$ORIGIN_PORT policy=DIRECT .* close=done" \
    "the SOCKS5 flow is a socks flow"

say "HTTP forwarding (curl -x http://) through the same port"
got=$(fetch_sha -x "http://$P" "$O/1m.bin")
assert_eq "$SHA_1M" "$got" "sha256 of 1 MiB over the HTTP proxy equals the file's"
say "HTTP CONNECT (curl -p -x http://) through the same port"
got=$(fetch_sha -p -x "http://$P" "$O/small")
assert_eq "$SHA_SMALL" "$got" "sha256 over a CONNECT tunnel equals the file's"
n=$(wait_log_count "flow [0-9]+ tcp http 127\.0\.0\.1:[0-9]+ -> 127\.0\.0\.1:$ORIGIN_PORT policy=DIRECT" 2)
assert_eq 2 "$n" "two http flows (forward and CONNECT)"

say "the users table holds for both protocols"
check "SOCKS5 without credentials fails"
if curl -s -o /dev/null --max-time 5 --socks5-hostname "127.0.0.1:$MIXED_PORT" "$O/small"; then
    fail "SOCKS5 without credentials got through"
fi
check "HTTP without credentials gets 407"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -x "http://127.0.0.1:$MIXED_PORT" "$O/small" || true)
assert_eq 407 "$code" "HTTP status without Proxy-Authorization"

say "refused first bytes, each followed by a client that works"
python3 - "$MIXED_PORT" "$TEST_NAME" <<'PY'
import socket, sys
port, name = int(sys.argv[1]), sys.argv[2]
def check(m): print(f"{name}: check: {m}", flush=True)
def fail(m):
    print(f"{name}: FAIL: {m}", file=sys.stderr, flush=True); sys.exit(1)
def until_close(s):
    out = b""
    try:
        while True:
            b = s.recv(4096)
            if not b:
                return out, "closed"
            out += b
    except ConnectionResetError:
        return out, "reset"
    except socket.timeout:
        return out, "open"
def conn():
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(5)
    return s
def socks5_ok():
    s = conn()
    s.sendall(b"\x05\x01\x02")
    if s.recv(2) != b"\x05\x02":
        fail("a SOCKS5 client after the refused one got no method reply")
    s.close()
cases = [
    ("SOCKS4 CONNECT gets the SOCKS4 'rejected' reply and a close",
     b"\x04\x01\x00\x50\x7f\x00\x00\x01\x00", b"\x00\x5b\x00\x00\x00\x00\x00\x00"),
    ("a TLS ClientHello start (0x16) is closed without a byte", b"\x16\x03\x01\x00\x05", b""),
    ("a NUL first byte is closed without a byte", b"\x00garbage", b""),
]
for msg, send, want in cases:
    check(msg)
    s = conn()
    s.sendall(send)
    got, end = until_close(s)
    if got != want or end == "open":
        fail(f"{msg}: got {got.hex() or 'nothing'} ({end}), want {want.hex() or 'nothing'} then close")
    check("the next SOCKS5 client gets its method reply")
    socks5_ok()
check("a client that connects and says nothing is closed at the handshake deadline (2 s)")
s = conn()
s.settimeout(6)
got, end = until_close(s)
if end == "open" or got:
    fail(f"a silent client: {end}, {got.hex()}")
check("a SOCKS5 client that waits 1.2 s before its first byte, then stalls, is closed 2 s after it connected")
import time
t0 = time.time()
s = conn()
s.settimeout(6)
time.sleep(1.2)
s.sendall(b"\x05")
got, end = until_close(s)
took = time.time() - t0
if end == "open" or not 1.8 <= took < 2.9:
    fail(f"closed after {took:.2f} s ({end}), want 2 s: the wait for the first byte counts")
PY
assert_log "mixed: 127\.0\.0\.1:[0-9]+ speaks SOCKS4 \(first byte 0x04\): refused" "the SOCKS4 refusal is logged"
assert_log "mixed: 127\.0\.0\.1:[0-9]+ sent first byte 0x16 \(a TLS handshake" "the TLS refusal is logged"
assert_log "mixed: 127\.0\.0\.1:[0-9]+ sent first byte 0x00, neither" "the NUL refusal is logged"
got=$(fetch_sha -x "http://$P" "$O/small")
assert_eq "$SHA_SMALL" "$got" "HTTP still works after the refusals"
mkdir -p "$E2E_TMP/clash"
say "a mixed port on the socks port is refused at load"
cat >"$E2E_TMP/clash/main.lua" <<LUA
local chute = require "chute"
chute.config { listen = { mixed = "127.0.0.1:$MIXED_PORT", socks = "127.0.0.1:$MIXED_PORT" } }
LUA
check "chute check names both listeners"
if out=$("$CHUTE" check "$E2E_TMP/clash" 2>&1); then fail "check passed: $out"; fi
assert_match "main\.lua:2: chute\.config: listen\.mixed \(127\.0\.0\.1:$MIXED_PORT\) and listen\.socks \(127\.0\.0\.1:$MIXED_PORT\) share a port" "$out" \
    "the error"

say "examples/default (its ports moved to this test's) serves both over its mixed port"
chute_alive
chute_stop_within 5
read -r EX_PORT EX_SOCKS <<<"$(e2e_ports 2)"
mkdir -p "$E2E_TMP/example"
sed -e "s/127\.0\.0\.1:1080/127.0.0.1:$EX_SOCKS/; s/127\.0\.0\.1:8080/127.0.0.1:$HTTP_PORT/" \
    -e "s/127\.0\.0\.1:7890/127.0.0.1:$EX_PORT/" "$CHUTE_TOP/examples/default/main.lua" \
    >"$E2E_TMP/example/main.lua"
grep -q "mixed = \"127.0.0.1:$EX_PORT\"" "$E2E_TMP/example/main.lua" || fail "the example has no mixed port to move"
CHUTE_LOG=$E2E_TMP/example.log
"$CHUTE" run "$E2E_TMP/example" 2>"$CHUTE_LOG" &
CHUTE_PID=$!
wait_port 127.0.0.1 "$EX_PORT" 10 || { chute_alive; fail "the example's mixed port does not accept"; }
got=$(fetch_sha --socks5-hostname "127.0.0.1:$EX_PORT" "$O/small")
assert_eq "$SHA_SMALL" "$got" "the example's mixed port over SOCKS5"
got=$(fetch_sha -x "http://127.0.0.1:$EX_PORT" "$O/small")
assert_eq "$SHA_SMALL" "$got" "the example's mixed port over HTTP"
e2e_pass
