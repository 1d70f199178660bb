#!/usr/bin/env bash
# Trojan through the TUN: Debian's trojan server in the server namespace
# with a certificate from a throwaway CA (openssl), nginx as its fallback.
# A 1 GiB download through it is exact (sha256) and its flow line names
# the proxy; an upload arrives intact; nothing goes out in clear; a wrong
# password never reaches the destination (trojan hands such a connection
# to its fallback, nginx, which answers 400); and without
# skip_cert_verify the certificate is checked against the system trust
# store, which does not hold the test CA: refused, with the reason logged.
#
# chute.proxy has no option naming a CA file yet (tls_ctx_new takes one,
# the bundle cannot give it), so the working proxy uses skip_cert_verify.
. "$(dirname "$0")/outlib.bash"
need_root
need_cmd trojan openssl
netns_setup
servers_start http

say "a test CA and a certificate for trojan.test / $SRV4"
(
    cd "$NETNS_TMP"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=chute e2e test CA" \
        -keyout ca.key -out ca.crt
    openssl req -newkey rsa:2048 -nodes -subj "/CN=trojan.test" -keyout srv.key -out srv.csr
    printf 'subjectAltName=DNS:trojan.test,IP:%s\nextendedKeyUsage=serverAuth\n' "$SRV4" >srv.ext
    openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
        -extfile srv.ext -out srv.crt
) >"$NETNS_TMP/openssl.log" 2>&1 || fail "openssl: $(tail -n 5 "$NETNS_TMP/openssl.log")"
openssl verify -CAfile "$NETNS_TMP/ca.crt" "$NETNS_TMP/srv.crt" >/dev/null || fail "the test certificate does not verify"

cat >"$NETNS_TMP/trojan.json" <<EOF
{
    "run_type": "server",
    "local_addr": "$SRV4",
    "local_port": 4443,
    "remote_addr": "$SRV4",
    "remote_port": $HTTP_PORT,
    "password": ["trojan-pw-1", "another one"],
    "log_level": 1,
    "ssl": {
        "cert": "$NETNS_TMP/srv.crt",
        "key": "$NETNS_TMP/srv.key",
        "key_password": "",
        "prefer_server_cipher": true,
        "alpn": ["http/1.1"],
        "reuse_session": true,
        "session_ticket": false,
        "session_timeout": 600,
        "plain_http_response": "",
        "curves": "",
        "dhparam": ""
    },
    "tcp": { "prefer_ipv4": true, "no_delay": true, "keep_alive": true,
             "reuse_port": false, "fast_open": false, "fast_open_qlen": 20 },
    "mysql": { "enabled": false }
}
EOF
trojan -t -c "$NETNS_TMP/trojan.json" >"$NETNS_TMP/trojan-test.log" 2>&1 || fail "trojan -t rejects the config: $(tail -n 5 "$NETNS_TMP/trojan-test.log")"
bg_in "$NS_SRV" "$NETNS_TMP/trojan.log" trojan -c "$NETNS_TMP/trojan.json"
wait_tcp "$NS_SRV" "$SRV4" 4443 10 || fail "trojan did not start: $(tail -n 5 "$NETNS_TMP/trojan.log")"

# A sink for the upload: reads 64 MiB, answers with their sha256.
cat >"$NETNS_TMP/sink.py" <<'PY'
import hashlib, socket, sys
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((sys.argv[1], int(sys.argv[2])))
ls.listen(4)
open(sys.argv[3], "w").write("ready\n")
while True:
    c, _ = ls.accept()
    h, left = hashlib.sha256(), 64 << 20
    while left:
        d = c.recv(min(left, 1 << 20))
        if not d:
            break
        h.update(d)
        left -= len(d)
    c.sendall(h.hexdigest().encode())
    c.close()
PY
bg_in "$NS_SRV" "$NETNS_TMP/sink.log" "$PY" "$NETNS_TMP/sink.py" "$SRV4" 9100 "$NETNS_TMP/sink.ready"
wait_file "$NETNS_TMP/sink.ready" 10 || fail "the sink did not start"

tun_bundle <<LUA
chute.proxy "tj" { type = "trojan", server = "$SRV4", port = 4443, password = "trojan-pw-1",
                   sni = "trojan.test", skip_cert_verify = true }
chute.proxy "tjverify" { type = "trojan", server = "$SRV4", port = 4443, password = "trojan-pw-1",
                         sni = "trojan.test" }
chute.proxy "tjbadpw" { type = "trojan", server = "$SRV4", port = 4443, password = "not-it",
                        sni = "trojan.test", skip_cert_verify = true }
function chute.route(flow)
  if flow.dst_port == $ALT_PORT then return "tjbadpw" end
  if flow.dst_ip == "$SRV6" then return "tjverify" end
  return "tj"
end
LUA
tun_chute_start
assert_log "proxy tj: skip_cert_verify" "skip_cert_verify is warned about at load"

check "GET /small and /1m.bin through trojan"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha -H "Connection: close" --max-time 10 "http://$SRV4:$HTTP_PORT/small")" "small via tj"
assert_eq "$SHA_1M" "$(cli_fetch_sha -H "Connection: close" --max-time 10 "http://$SRV4:$HTTP_PORT/1m.bin")" "1m.bin via tj"
assert_log "tcp tun .* -> $SRV4:$HTTP_PORT policy=tj .*down=1048[0-9]{3} .*close=done" "the tj flow line"

check "nothing in clear on the wire to trojan"
cat >"$NETNS_TMP/sniff.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(socket.SOL_SOCKET, 33, 256 << 20)  # SO_RCVBUFFORCE: lose nothing
s.bind((sys.argv[1], 0))
out = open(sys.argv[2], "wb", buffering=0)
open(sys.argv[3], "w").write("ready\n")
while True:
    out.write(s.recv(65536 + 64))
PY
bg_in "$NS_CLI" "$NETNS_TMP/sniff.log" "$PY" "$NETNS_TMP/sniff.py" veth0 "$NETNS_TMP/wire.raw" "$NETNS_TMP/sniff.ready"
TD=$BG_PID
wait_file "$NETNS_TMP/sniff.ready" 10 || fail "the capture did not start"
MARK="chute-cleartext-marker-$$"
assert_eq "$SHA_1M" "$(cli_fetch_sha -H "Connection: close" --max-time 10 -H "X-Marker: $MARK" "http://$SRV4:$HTTP_PORT/1m.bin")" "1m.bin via tj (captured)"
sleep 0.3
kill_wait "$TD" || true
found=$(python3 - "$NETNS_TMP/wire.raw" "$WWW/1m.bin" "$MARK" <<'PY'
import hashlib, sys
wire = open(sys.argv[1], "rb").read()
body = open(sys.argv[2], "rb").read()
needles = {"marker": sys.argv[3].encode(), "request line": b"GET /",
           "password hash": hashlib.sha224(b"trojan-pw-1").hexdigest().encode()}
for off in range(4096, len(body) - 64, 131072):
    needles[f"1m.bin@{off}"] = body[off:off + 64]
print(" ".join(k for k, v in needles.items() if v in wire) or "none")
print(len(wire))
PY
)
assert_ge 1000000 "$(tail -n 1 <<<"$found")" "the capture holds the transfer"
assert_eq none "$(head -n 1 <<<"$found")" "plaintext found in the capture"

say "making the 1 GiB file"
big_file "${BIG_MIB:-1024}"
t0=$(now)
got=$(cli_fetch_sha -H "Connection: close" --max-time 80 "http://$SRV4:$HTTP_PORT/big.bin")
secs=$(elapsed "$t0")
say "big.bin via trojan in ${secs}s ($(awk -v s="$secs" -v b="$BIG_SIZE" 'BEGIN { printf "%.0f", b * 8 / 1e6 / s }') Mbit/s)"
assert_eq "$SHA_BIG" "$got" "the big download's sha256 via trojan"
assert_eq 1 "$(flows_down_ge "policy=tj " "$BIG_SIZE" 1)" "one tj flow line with down >= $BIG_SIZE"

check "a 64 MiB upload through trojan arrives intact"
out=$(cli_py "$SRV4" 9100 <<'PY'
import hashlib, os, socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
h = hashlib.sha256()
block = os.urandom(1 << 20)
for i in range(64):
    b = bytes([i]) + block[1:]
    h.update(b)
    s.sendall(b)
got = s.recv(100)
print("same" if got.decode() == h.hexdigest() else f"differs: {got!r}")
PY
) || fail "the upload failed: $out"
assert_eq same "$out" "the sink's digest of the upload"
assert_log "-> $SRV4:9100 policy=tj .* up=67108864 " "the upload's flow line: up=64 MiB"

check "a wrong password: trojan hands the connection to its fallback; the file never arrives"
body=$(cli_curl --max-time 8 "http://$SRV4:$ALT_PORT/small" 2>/dev/null || true)
[ "$body" != "hello from the tun e2e server" ] || fail "a wrong trojan password reached the destination"
say "answer with the wrong password: $(head -c 80 <<<"$body" | tr '\r\n' '  ')"
if grep -q " :$ALT_PORT\|$SRV4:$ALT_PORT" "$NETNS_TMP/access.log"; then
    fail "nginx on :$ALT_PORT got a request through a wrong trojan password"
fi

check "skip_cert_verify off: the test CA is not in the system trust store, so the proxy is refused"
t0=$(now)
rc=$(cli_curl -o /dev/null --max-time 8 "http://[$SRV6]:$HTTP_PORT/small" >/dev/null 2>&1; echo $?)
[ "$rc" != 0 ] || fail "a proxy with an untrusted certificate was used"
assert_log "flow [0-9]+: connect \[fd20::2\]:$HTTP_PORT: tls: " "the log names the TLS failure"
say "logged: $(grep -E "connect \[fd20::2\]:$HTTP_PORT: tls: " "$CHUTE_LOG" | tail -n 1 | cut -c25-)"
lt "$(elapsed "$t0")" 5 || fail "the refused proxy took too long"

check "tj still works after the failures"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha -H "Connection: close" --max-time 10 "http://$SRV4:$HTTP_PORT/small")" "small via tj"
stats_read
assert_decided_once
chute_alive

# Checked last. The requests above say "Connection: close", so nginx ends
# each connection and the flow closes from the server's side. A client that
# closes a keep-alive connection sends only a FIN; TLS 1.2 has no
# half-close, and chute's TLS stream (core/tls/client.c st_shutdown) does
# not turn the FIN into a close_notify, so the trojan connection stays
# open until the server gives up (nginx's keepalive_timeout, 60 s here) or
# chute's idle timeout: the flow outlives its client.
check "a client closing a keep-alive connection: the trojan connection closes within 5 s"
stats_read K0
cli_curl -o /dev/null --max-time 5 "http://$SRV4:$HTTP_PORT/small" || fail "GET through tj failed"
t0=$(now)
while :; do
    stats_read K1
    [ "$K1_flows_active" -le "$K0_flows_active" ] && break
    lt "$(elapsed "$t0")" 5 || break
    sleep 0.2
done
say "flows_active $K0_flows_active -> $K1_flows_active, $(elapsed "$t0")s after the client closed"
assert_eq "$K0_flows_active" "$K1_flows_active" "flows still open 5 s after their client closed"
pass
