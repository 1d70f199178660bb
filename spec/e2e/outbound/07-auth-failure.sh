#!/usr/bin/env bash
# Shadowsocks authentication failures close only their own flow, and are
# counted (stats key proxy_auth_failures):
#   corrupt   the real ss-server behind a relay that flips one byte of the
#             server -> client ciphertext (at 300000): the download stops
#             there, the client gets a reset, not a truncated "success"
#   impostor  a server answering with bytes sealed under another key
#   wrongpw   our password is wrong: ss-server cannot open our bytes and
#             never answers (it does not hang up either: probe
#             resistance); nothing reaches the destination, nothing to
#             authenticate on our side, so nothing is counted
#   UDP       an impostor's datagrams are dropped and counted; the good
#             UDP proxy keeps echoing
# Meanwhile a 256 MiB download through the good proxy runs in parallel and
# arrives intact. The same corrupted stream through chute's SOCKS5
# listener (the stream relay, not the TUN's) is closed and counted too.
. "$(dirname "$0")/outlib.bash"
need_root
need_cmd ss-server
netns_setup
servers_start http udp

ss_start 8501 aes-256-gcm "right-pw" -u
tcp_relay_start 8502 8501 300000
# The impostor: after the client's first bytes, 64 KiB of random bytes
# (a random salt, then chunks no key opens); for UDP, random datagrams.
cat >"$NETNS_TMP/impostor.py" <<'PY'
import os, socket, sys, threading
host, port = sys.argv[1], int(sys.argv[2])
def serve(c):
    try:
        c.recv(4096)
        c.sendall(os.urandom(65536))
        c.recv(4096)
    except OSError:
        pass
    c.close()
def tcp():
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(16)
    while True:
        threading.Thread(target=serve, args=(ls.accept()[0],), daemon=True).start()
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((host, port))
    while True:
        d, peer = u.recvfrom(65535)
        u.sendto(os.urandom(len(d)), peer)
threading.Thread(target=tcp, daemon=True).start()
threading.Thread(target=udp, daemon=True).start()
open(sys.argv[3], "w").write("ready\n")
threading.Event().wait()
PY
bg_in "$NS_SRV" "$NETNS_TMP/impostor.log" "$PY" "$NETNS_TMP/impostor.py" "$SRV4" 8503 "$NETNS_TMP/impostor.ready"
wait_file "$NETNS_TMP/impostor.ready" 10 || fail "the impostor did not start"

SOCKS=127.0.0.1:1080
tun_bundle "  listen = { socks = \"$SOCKS\" }," <<LUA
local function ss(port, pw)
  return { type = "shadowsocks", server = "$SRV4", port = port, cipher = "aes-256-gcm", password = pw }
end
chute.proxy "good" (ss(8501, "right-pw"))
chute.proxy "corrupt" (ss(8502, "right-pw"))
chute.proxy "impostor" (ss(8503, "right-pw"))
chute.proxy "wrongpw" (ss(8501, "wrong-pw"))
function chute.route(flow)
  if flow.inbound == "socks" then return "corrupt" end
  if flow.network == "udp" then
    if flow.dst_port == $ECHO_PORT then return "good" end
    return "impostor"
  end
  if flow.dst_ip == "$SRV6" and flow.dst_port == $ALT_PORT then return "wrongpw" end
  if flow.dst_ip == "$SRV6" then return "impostor" end
  if flow.dst_port == $ALT_PORT then return "corrupt" end
  return "good"
end
LUA
tun_chute_start
wait_tcp "$NS_CLI" 127.0.0.1 1080 10 || fail "chute's SOCKS5 listener does not accept"

stats_read A
assert_eq 0 "$A_proxy_auth_failures" "proxy_auth_failures at start"

say "a 256 MiB download through the good proxy, in the background"
big_file 256
(cli_fetch_sha --max-time 60 "http://$SRV4:$HTTP_PORT/big.bin" >"$NETNS_TMP/bg.sha") 2>"$NETNS_TMP/bg.err" &
BGDL=$!
sleep 0.3

check "corrupted ciphertext: the download through 'corrupt' fails, it is not delivered as complete"
rc=0
ip netns exec "$NS_CLI" curl -s -o "$NETNS_TMP/corrupt.out" --max-time 20 "http://$SRV4:$ALT_PORT/1m.bin" || rc=$?
got=$(stat -c %s "$NETNS_TMP/corrupt.out" 2>/dev/null || echo 0)
say "curl rc=$rc, $got bytes before the failure"
[ "$rc" != 0 ] || fail "curl reported success through a corrupted stream ($got bytes)"
[ "$got" -lt 1048576 ] || fail "the whole file arrived through a corrupted stream"
if [ "$got" -gt 0 ]; then
    head -c "$got" "$WWW/1m.bin" | cmp -s - "$NETNS_TMP/corrupt.out" || fail "bytes after the corruption reached the client"
fi
grep -q "flipped byte 300000" "$NETNS_TMP/relay-8502.log" || fail "the relay did not corrupt anything"
assert_log "-> $SRV4:$ALT_PORT policy=corrupt .*close=(upstream authentication failed|auth failed)" "the flow line says authentication failed"

check "an impostor server: the flow fails at once, counted"
rc=$(cli_curl -o /dev/null --max-time 8 "http://[$SRV6]:$HTTP_PORT/small" >/dev/null 2>&1; echo $?)
[ "$rc" != 0 ] || fail "curl through the impostor succeeded"
assert_log "-> \[fd20::2\]:$HTTP_PORT policy=impostor .*close=(upstream authentication failed|auth failed)" "the impostor flow line says authentication failed"

check "a wrong password: ss-server cannot open our bytes; the flow never delivers"
# shadowsocks-libev does not hang up on a bad tag (probe resistance: it
# keeps reading), so chute cannot tell a wrong password from a slow
# server: the client's own timeout ends the flow.
rc=$(cli_curl -o /dev/null --max-time 3 "http://[$SRV6]:$ALT_PORT/small" >/dev/null 2>&1; echo $?)
[ "$rc" != 0 ] || fail "curl with a wrong shadowsocks password succeeded"
assert_log "-> \[fd20::2\]:$ALT_PORT policy=wrongpw " "the wrongpw flow line"
say "wrongpw: $(flow_lines "policy=wrongpw" | tail -n 1 | sed 's/.* up=/up=/')"
assert_eq 0 "$(grep -c "srv=fd20::2:$ALT_PORT" "$NETNS_TMP/access.log" || true)" "requests that reached nginx through the wrong password"

stats_read B
assert_ge 2 "$B_proxy_auth_failures" "proxy_auth_failures after the corrupt and impostor flows"

check "the parallel download through the good proxy completed intact"
wait "$BGDL" || fail "the background download failed: $(cat "$NETNS_TMP/bg.err")"
assert_eq "$SHA_BIG" "$(cat "$NETNS_TMP/bg.sha")" "the 256 MiB download's sha256"
assert_log "policy=good .*down=2684[0-9]{5} .*close=done" "the good flow closed normally"

check "UDP: the impostor's datagrams are dropped and counted; the good proxy still echoes"
out=$(cli_py "$SRV4" "$ECHO_PORT" 9000 <<'PY'
import socket, sys
host, good, bad = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
g = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); g.connect((host, good)); g.settimeout(2)
b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); b.connect((host, bad)); b.settimeout(0.5)
ok = forged = 0
for i in range(10):
    b.send(b"to the impostor %d" % i)
    try:
        b.recv(65535)
        forged += 1
    except (socket.timeout, ConnectionRefusedError):
        pass
    msg = b"good %d" % i
    g.send(msg)
    try:
        if g.recv(65535) == msg:
            ok += 1
    except socket.timeout:
        pass
print(f"ok={ok} forged={forged}")
PY
)
assert_eq "ok=10 forged=0" "$out" "good echoes, no forged datagram delivered"
stats_read C
assert_ge $((B_proxy_auth_failures + 10)) "$C_proxy_auth_failures" "each forged datagram counted"

check "the good proxy still works"
assert_eq "$SHA_1M" "$(cli_fetch_sha --max-time 10 "http://$SRV4:$HTTP_PORT/1m.bin")" "1m.bin via good"
check "chute's SOCKS5 listener -> the corrupted stream: closed, counted"
rc=0
ip netns exec "$NS_CLI" curl -s -o /dev/null --max-time 20 --socks5 "$SOCKS" "http://$SRV4:$HTTP_PORT/1m.bin" || rc=$?
[ "$rc" != 0 ] || fail "curl via chute's SOCKS5 listener succeeded through a corrupted stream"
assert_log "tcp socks .* policy=corrupt .*close=(upstream authentication failed|auth failed)" "the socks flow line says authentication failed"
stats_read D
assert_ge $((C_proxy_auth_failures + 1)) "$D_proxy_auth_failures" "the SOCKS5 inbound's authentication failure is counted"

chute_alive
pass
