#!/usr/bin/env bash
# Trojan's UDP (CMD 3 UDP ASSOCIATE, datagrams framed in the TLS stream)
# through the TUN, with the server's certificate checked against a CA the
# bundle names (ca = FILE): 200 datagrams of 1..1400 bytes come back exact,
# the echo sees trojan's address, the flow line names the proxy; a TCP
# fetch through the same checked proxy works; a proxy whose ca is another
# CA is refused at the handshake.
. "$(dirname "$0")/outlib.bash"
need_root
need_cmd trojan openssl
netns_setup
servers_start http

(
    cd "$NETNS_TMP"
    for ca in ca other; do
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
            -subj "/CN=chute e2e $ca" -keyout $ca.key -out $ca.crt
    done
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=trojan.test" \
        -keyout srv.key -out srv.csr
    printf 'subjectAltName=DNS:trojan.test,IP:%s\nextendedKeyUsage=serverAuth\n' "$SRV4" >srv.ext
    openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
        -extfile srv.ext -out srv.crt
) >"$NETNS_TMP/openssl.log" 2>&1 || fail "openssl: $(tail -n 5 "$NETNS_TMP/openssl.log")"

cat >"$NETNS_TMP/trojan.json" <<JSON
{ "run_type": "server", "local_addr": "$SRV4", "local_port": 4444,
  "remote_addr": "$SRV4", "remote_port": $HTTP_PORT, "password": ["udp-pw"], "log_level": 1,
  "ssl": { "cert": "$NETNS_TMP/srv.crt", "key": "$NETNS_TMP/srv.key", "alpn": ["http/1.1"],
           "session_ticket": false } }
JSON
bg_in "$NS_SRV" "$NETNS_TMP/trojan.log" trojan -c "$NETNS_TMP/trojan.json"
wait_tcp "$NS_SRV" "$SRV4" 4444 10 || fail "trojan did not start: $(tail -n 5 "$NETNS_TMP/trojan.log")"

cat >"$NETNS_TMP/echo.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
open(sys.argv[3], "w").write("ready\n")
seen = set()
while True:
    data, peer = s.recvfrom(65535)
    s.sendto(data, peer)
    if peer[0] not in seen:
        seen.add(peer[0])
        print(f"from={peer[0]}", flush=True)
PY
bg_in "$NS_SRV" "$NETNS_TMP/echo.log" "$PY" "$NETNS_TMP/echo.py" "$SRV4" 7101 "$NETNS_TMP/echo.ready"
wait_file "$NETNS_TMP/echo.ready" 10 || fail "the UDP echo did not start"

tun_bundle <<LUA
chute.proxy "tju" { type = "trojan", server = "$SRV4", port = 4444, password = "udp-pw",
                    ca = "$NETNS_TMP/ca.crt" }
chute.proxy "tjwrong" { type = "trojan", server = "$SRV4", port = 4444, password = "udp-pw",
                        ca = "$NETNS_TMP/other.crt" }
function chute.route(flow)
  if flow.dst_port == $ALT_PORT then return "tjwrong" end
  return "tju"
end
LUA
tun_chute_start

check "200 datagrams through Trojan's UDP come back exact"
out=$(cli_py "$SRV4" 7101 <<'PY'
import random, socket, sys
rng = random.Random(7)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((sys.argv[1], int(sys.argv[2])))
s.settimeout(3)
ok = total = 0
for i in range(200):
    n = 1 if i == 0 else rng.randrange(2, 1400)
    data = bytes(rng.getrandbits(8) for _ in range(n))
    s.send(data)
    total += n
    try:
        got = s.recv(65535)
    except socket.timeout:
        got = None
    ok += got == data
print(f"sent=200 ok={ok} bytes={total}")
PY
) || fail "the UDP client failed: $out"
bytes=$(sed -n 's/.* bytes=\([0-9]*\)$/\1/p' <<<"$out")
assert_eq "sent=200 ok=200 bytes=$bytes" "$out" "all 200 echoed through tju"
assert_eq "from=$SRV4" "$(cat "$NETNS_TMP/echo.log")" "the echo saw trojan's address only"

check "TCP through the same proxy, its certificate checked against the bundle's ca"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 10 "http://$SRV4:$HTTP_PORT/small")" \
    "GET /small through tju"

check "a proxy whose ca did not sign the certificate is refused"
rc=0
cli curl -s -o /dev/null --max-time 5 "http://$SRV4:$ALT_PORT/small" || rc=$?
[ "$rc" != 0 ] || fail "a proxy with the wrong CA carried a flow"
assert_log "tls: certificate not trusted" "the refusal names the reason"

chute_stop_within 5
assert_eq 1 "$(flow_lines "udp tun .* policy=tju $RULE_RE up=$bytes down=$bytes " | wc -l)" \
    "the UDP flow line: policy=tju, up=down=$bytes"
pass
