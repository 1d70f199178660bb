#!/usr/bin/env bash
# Shadowsocks UDP through the TUN: ss-server -u per cipher, a UDP echo per
# cipher in the server namespace. 200 datagrams of 1..1400 bytes each come
# back exact over each cipher (one datagram per AEAD packet); the echo
# sees ss-server as the sender (the path went through the proxy), the
# flow lines name the proxy, a proxy named by a DNS name (resolved through
# chute's resolver: dnsmasq) works too, and a proxy declared with
# udp = false does not carry UDP (nothing reaches its echo).
. "$(dirname "$0")/outlib.bash"
need_root
need_cmd ss-server
netns_setup
servers_start dns

# One echo per port; each logs the peers it saw (one line per new peer).
cat >"$NETNS_TMP/echo.py" <<'PY'
import selectors, socket, sys
sel = selectors.DefaultSelector()
for port in sys.argv[3:]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((sys.argv[1], int(port)))
    sel.register(s, selectors.EVENT_READ)
seen = set()
open(sys.argv[2], "w").write("ready\n")
while True:
    for key, _ in sel.select():
        data, peer = key.fileobj.recvfrom(65535)
        key.fileobj.sendto(data, peer)
        k = (key.fileobj.getsockname()[1], peer[0])
        if k not in seen:
            seen.add(k)
            print(f"port={k[0]} from={k[1]}", flush=True)
PY
bg_in "$NS_SRV" "$NETNS_TMP/echo.log" "$PY" "$NETNS_TMP/echo.py" "$SRV4" "$NETNS_TMP/echo.ready" 7001 7002 7003 7004 7005
wait_file "$NETNS_TMP/echo.ready" 10 || fail "the UDP echo did not start"

ss_start 8391 aes-128-gcm "udp-one" -u
ss_start 8392 aes-256-gcm "udp-two" -u
ss_start 8393 chacha20-ietf-poly1305 "udp-three" -u
ss_start 8394 aes-128-gcm "udp-four" -u
tun_bundle "  dns = { upstream = \"$SRV4\", persist = false }," <<LUA
chute.proxy "u128" { type = "shadowsocks", server = "$SRV4", port = 8391,
                     cipher = "aes-128-gcm", password = "udp-one" }
chute.proxy "u256" { type = "shadowsocks", server = "$SRV4", port = 8392,
                     cipher = "aes-256-gcm", password = "udp-two", udp = true }
chute.proxy "uchacha" { type = "shadowsocks", server = "$SRV4", port = 8393,
                        cipher = "chacha20-ietf-poly1305", password = "udp-three" }
chute.proxy "tcponly" { type = "shadowsocks", server = "$SRV4", port = 8394,
                        cipher = "aes-128-gcm", password = "udp-four", udp = false }
chute.proxy "byname" { type = "shadowsocks", server = "test.example", port = 8391,
                       cipher = "aes-128-gcm", password = "udp-one" }
local by_port = { [7001] = "u128", [7002] = "u256", [7003] = "uchacha", [7004] = "tcponly",
                  [7005] = "byname" }
function chute.route(flow)
  return by_port[flow.dst_port] or "DIRECT"
end
LUA
tun_chute_start

echo_run() { # PORT: 200 datagrams one by one, each echo checked
    cli_py "$SRV4" "$1" <<'PY'
import random, socket, sys
host, port = sys.argv[1], int(sys.argv[2])
rng = random.Random(port)
sizes = [1, 2, 100, 512, 1000, 1400] + [rng.randrange(3, 1400) for _ in range(194)]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((host, port))
s.settimeout(2)
ok = total = 0
for i, n in enumerate(sizes):
    data = bytes(rng.getrandbits(8) for _ in range(n))
    s.send(data)
    total += n
    for attempt in range(2):
        try:
            got = s.recv(65535)
        except socket.timeout:
            got = None
            break
        if got == data:
            break
    if got == data:
        ok += 1
    else:
        print(f"datagram {i} ({n} bytes): {'no echo in 2 s' if got is None else 'echo differs'}")
print(f"sent={len(sizes)} ok={ok} bytes={total}")
PY
}

for pp in 7001:u128 7002:u256 7003:uchacha 7005:byname; do
    port=${pp%%:*} name=${pp#*:}
    check "200 datagrams through $name to the echo on :$port come back exact"
    out=$(echo_run "$port") || fail "the UDP client failed: $out"
    res=$(tail -n 1 <<<"$out")
    bytes=$(sed -n 's/.* bytes=\([0-9]*\)$/\1/p' <<<"$res")
    assert_eq "sent=200 ok=200 bytes=$bytes" "$res" "all 200 echoed via $name ($(head -n 3 <<<"$out" | tr '\n' ' '))"
    eval "BYTES_$name=$bytes"
done

check "the echoes saw ss-server's address, never the TUN's"
assert_eq "" "$(grep -v "from=$SRV4\$" "$NETNS_TMP/echo.log" || true)" "echo peers other than $SRV4"
for port in 7001 7002 7003 7005; do
    grep -q "port=$port from=$SRV4" "$NETNS_TMP/echo.log" || fail "the echo on :$port got nothing from ss-server"
done

check "a proxy with udp = false carries no UDP"
out=$(cli_py "$SRV4" 7004 <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((sys.argv[1], int(sys.argv[2])))
s.settimeout(1.5)
try:
    s.send(b"x" * 10)
    s.recv(100)
    print("answered")
except ConnectionRefusedError:
    print("refused")
except socket.timeout:
    print("timeout")
PY
)
assert_match '^(refused|timeout)$' "$out" "UDP to :7004 through tcponly is not answered ($out)"
grep -q "port=7004" "$NETNS_TMP/echo.log" && fail "a datagram reached the echo on :7004 through a udp = false proxy"

stats_read
assert_eq 0 "$S_proxy_auth_failures" "proxy_auth_failures: none"
assert_eq 1 "$S_udp_dropped" "udp_dropped: the one datagram to the udp = false proxy"
assert_log "udp 10\\.200\\.0\\.2:7004: the proxy has udp = false" "the refusal is logged with its reason"
chute_stop_within 5
for name in u128 u256 uchacha byname; do
    b=BYTES_$name
    assert_eq 1 "$(flow_lines "udp tun .* policy=$name $RULE_RE up=${!b} down=${!b} " | wc -l)" \
        "the $name flow line: policy=$name, up=down=${!b}"
done
pass
