#!/usr/bin/env bash
# Clients the MITM must survive and explain (root): the BearSSL resumption
# crash (a cached session resumed with an ALPN list that shares nothing
# with ours), a TLS 1.3-only client, a ClientHello over 16 KiB, truncated
# records, and a pinned client: it refuses chute's leaf, which the log
# explains, and with auto_bypass the next connection passes through with
# the origin's own certificate. QUIC (UDP/443) to a MITM host is refused
# so the browser falls back to TCP, where chute can see it.
. "$(dirname "$0")/mitmlib.bash"
need_root
mitm_env_up "  mitm = { hosts = { \"test.example\", \"$SRV4\" }, auto_bypass = true, bypass_seconds = 60 }," <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
sclient() {
    ip netns exec "$NS_CLI" timeout 10 openssl s_client -connect "$SRV4:443" \
        -servername test.example -CAfile "$CHUTE_CA" "$@"
}

say "resumption with an ALPN list that shares nothing with ours"
printf 'GET /small HTTP/1.1\r\nHost: test.example\r\nConnection: close\r\n\r\n' |
    sclient -alpn http/1.1 -sess_out "$NETNS_TMP/sess.pem" -ign_eof >"$NETNS_TMP/s1.out" 2>&1 || true
assert_match "hello from the tun e2e server" "$(cat "$NETNS_TMP/s1.out")" "first handshake, a request served"
for i in 1 2 3; do
    sclient -alpn foo -sess_in "$NETNS_TMP/sess.pem" </dev/null >"$NETNS_TMP/s2.out" 2>&1 || true
done
chute_alive
assert_match "hello" "$(mcurl https://test.example/small)" "chute still serves after the resumption attempts"

say "a TLS 1.3-only client: a clean alert, and a log line naming the host"
sclient -tls1_3 </dev/null >"$NETNS_TMP/s3.out" 2>&1 || true
assert_match "alert|handshake failure" "$(cat "$NETNS_TMP/s3.out")" "the client got an alert"
wait_log "test\\.example: the client offers only TLS 1.3" 5 || fail "no log line for the TLS 1.3-only client"

say "a ClientHello over 16 KiB, and garbage"
"$PY" - "$NETNS_TMP/big-hello" <<'PY'
import struct, sys
ext = struct.pack(">HH", 0xffaa, 20000) + b"\0" * 20000
body = b"\x03\x03" + b"\0" * 32 + b"\0" + b"\x00\x02\xc0\x2b" + b"\x01\x00" + struct.pack(">H", len(ext)) + ext
hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
rec = b""
while hs:
    rec += b"\x16\x03\x01" + struct.pack(">H", min(len(hs), 16384)) + hs[:16384]
    hs = hs[16384:]
open(sys.argv[1], "wb").write(rec)
PY
ip netns exec "$NS_CLI" timeout 5 "$PY" -c '
import socket, sys
s = socket.create_connection((sys.argv[1], 443), timeout=5)
s.sendall(open(sys.argv[2], "rb").read())
try:
    s.recv(100)
except Exception:
    pass
' "$SRV4" "$NETNS_TMP/big-hello" || true
printf '\x16\x03\x01\x40\x00garbage' | ip netns exec "$NS_CLI" timeout 3 \
    "$PY" -c 'import socket,sys; s=socket.create_connection((sys.argv[1],443)); s.sendall(sys.stdin.buffer.read()); s.close()' "$SRV4" || true
chute_alive
assert_match "hello" "$(mcurl https://test.example/small)" "chute serves after hostile hellos"

say "a pinned client refuses the leaf: explained, then bypassed"
rc=0
ip netns exec "$NS_CLI" curl -sS --max-time 10 --cacert "$ORIGIN_CA" \
    --resolve "test.example:443:$SRV4" -o /dev/null https://test.example/small 2>/dev/null || rc=$?
assert_eq 60 "$rc" "curl trusting only the origin's CA refuses chute's leaf"
wait_log "mitm: the client refused chute's certificate for test\\.example" 5 ||
    fail "no hint naming the host"
wait_log "mitm: test\\.example passes through uninspected" 5 || fail "auto_bypass not logged"
ip netns exec "$NS_CLI" curl -sS --max-time 10 --cacert "$ORIGIN_CA" \
    --resolve "test.example:443:$SRV4" -o /dev/null https://test.example/small ||
    fail "after the bypass the origin's certificate reaches the client"
say "QUIC to a host on the MITM list: refused (ICMP port unreachable)"
out=$(cli_py "$SRV4" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((sys.argv[1], 443))
s.settimeout(2)
s.send(b"quic initial?")
try:
    s.recv(100)
    print("answered")
except ConnectionRefusedError:
    print("refused")
except socket.timeout:
    print("timeout")
PY
)
assert_eq refused "$out" "UDP/443 to $SRV4 refused"
stats_read
assert_ge 1 "$S_mitm_quic_blocked" "mitm_quic_blocked counts it"
assert_ge 1 "$S_mitm_client_refused" "mitm_client_refused counts it"
assert_ge 1 "$S_mitm_bypassed" "mitm_bypassed counts the flow passed through"
chute_alive
pass
