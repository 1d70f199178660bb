#!/usr/bin/env bash
# HTTP CONNECT proxies through the TUN, tinyproxy in the server namespace:
# one open, one with Basic auth. Downloads through each are exact and
# their flow lines name the proxy; a server that speaks first (a banner
# right after the tunnel opens, often in the same segment as the proxy's
# 200) reaches the client whole, and so do bytes a proxy sends in the same
# send as its 200 (through the TUN and chute's SOCKS5 and HTTP listeners,
# counted in down=); wrong credentials and a port the proxy
# refuses each fail their flow at once with the proxy's status in the log.
# Last, an https proxy (TLS to the proxy, CONNECT inside): with
# skip_cert_verify it works; without, a self-signed certificate is refused.
. "$(dirname "$0")/outlib.bash"
need_root
need_cmd tinyproxy
netns_setup
servers_start http

# A server that speaks first: "220 banner <n>\r\n", then echoes lines.
cat >"$NETNS_TMP/banner.py" <<'PY'
import socket, sys, threading
def serve(c, n):
    c.sendall(b"220 banner %d ready\r\n" % n)
    f = c.makefile("rb")
    for line in f:
        c.sendall(b"echo " + line)
    c.close()
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((sys.argv[1], int(sys.argv[2])))
ls.listen(64)
open(sys.argv[3], "w").write("ready\n")
n = 0
while True:
    c, _ = ls.accept()
    n += 1
    threading.Thread(target=serve, args=(c, n), daemon=True).start()
PY
bg_in "$NS_SRV" "$NETNS_TMP/banner.log" "$PY" "$NETNS_TMP/banner.py" "$SRV4" 2525 "$NETNS_TMP/banner.ready"
wait_file "$NETNS_TMP/banner.ready" 10 || fail "the banner server did not start"

# A CONNECT proxy whose 200 and the destination's first bytes leave in one
# send: the bytes past the reply belong to the client.
cat >"$NETNS_TMP/eager.py" <<'PY'
import socket, sys, threading
def serve(c):
    head = b""
    while b"\r\n\r\n" not in head:
        d = c.recv(4096)
        if not d:
            return c.close()
        head += d
    c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n220 eager hello\r\n")
    f = c.makefile("rb")
    for line in f:
        c.sendall(b"echo " + line)
    c.close()
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((sys.argv[1], int(sys.argv[2])))
ls.listen(16)
open(sys.argv[3], "w").write("ready\n")
while True:
    threading.Thread(target=serve, args=(ls.accept()[0],), daemon=True).start()
PY
bg_in "$NS_SRV" "$NETNS_TMP/eager.log" "$PY" "$NETNS_TMP/eager.py" "$SRV4" 3130 "$NETNS_TMP/eager.ready"
wait_file "$NETNS_TMP/eager.ready" 10 || fail "the eager proxy did not start"

TINY_EXTRA="ConnectPort 2525" tinyproxy_start 3128
tinyproxy_start 3129 bob 'pa55-word'
tun_bundle "  listen = { socks = \"127.0.0.1:1080\", http = \"127.0.0.1:8118\" }," <<LUA
chute.proxy "tiny" { type = "http", server = "$SRV4", port = 3128 }
chute.proxy "tinyauth" { type = "http", server = "$SRV4", port = 3129,
                         username = "bob", password = "pa55-word" }
chute.proxy "tinybad" { type = "http", server = "$SRV4", port = 3129,
                        username = "bob", password = "nope" }
chute.proxy "eager" { type = "http", server = "$SRV4", port = 3130 }
function chute.route(flow)
  if flow.dst_port == 2727 then return "eager" end
  if flow.dst_ip == "$SRV6" then return "tinybad" end
  if flow.dst_port == $ALT_PORT then return "tinyauth" end
  return "tiny"
end
LUA
tun_chute_start

check "GET /1m.bin through the open proxy and the authenticated one"
assert_eq "$SHA_1M" "$(cli_fetch_sha --max-time 10 "http://$SRV4:$HTTP_PORT/1m.bin")" "via tiny"
assert_eq "$SHA_1M" "$(cli_fetch_sha --max-time 10 "http://$SRV4:$ALT_PORT/1m.bin")" "via tinyauth"
assert_log "tcp tun .* -> $SRV4:$HTTP_PORT policy=tiny .*down=1048[0-9]{3} .*close=done" "the tiny flow line"
assert_log "tcp tun .* -> $SRV4:$ALT_PORT policy=tinyauth .*down=1048[0-9]{3} .*close=done" "the tinyauth flow line"
check "tinyproxy handled the CONNECTs (its log shows them)"
grep -q -i "CONNECT" "$NETNS_TMP/tinyproxy-3128.log" || fail "tinyproxy's log shows no CONNECT"

check "a server that speaks first: 20 connections each get their banner and an echo"
out=$(cli_py "$SRV4" 2525 <<'PY'
import socket, sys
ok = 0
for i in range(20):
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
    f = s.makefile("rb")
    banner = f.readline()
    s.sendall(b"ping %d\n" % i)
    echo = f.readline()
    if banner.startswith(b"220 banner ") and banner.endswith(b" ready\r\n") and echo == b"echo ping %d\n" % i:
        ok += 1
    else:
        print(f"connection {i}: banner={banner!r} echo={echo!r}")
    s.close()
print(f"ok={ok}")
PY
) || fail "the banner client failed: $out"
assert_eq "ok=20" "$(tail -n 1 <<<"$out")" "banners and echoes through CONNECT ($(head -n 2 <<<"$out" | tr '\n' ' '))"

check "a proxy that sends the destination's first bytes with its 200: they reach the client, counted"
eager_run() { # ARGS for the client: tun | socks | http
    cli_py "$SRV4" 2727 "$1" <<'PY'
import socket, sys
host, port, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if how == "tun":
    s = socket.create_connection((host, port), timeout=5)
elif how == "socks":
    s = socket.create_connection(("127.0.0.1", 1080), timeout=5)
    s.sendall(b"\x05\x01\x00")
    assert s.recv(2) == b"\x05\x00"
    s.sendall(b"\x05\x01\x00\x01" + socket.inet_aton(host) + port.to_bytes(2, "big"))
    rep = s.recv(10)
    assert rep[:2] == b"\x05\x00", rep
else:
    s = socket.create_connection(("127.0.0.1", 8118), timeout=5)
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host.encode(), port, host.encode(), port))
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert b" 200" in head.split(b"\r\n")[0], head
s.settimeout(5)
f = s.makefile("rb")
first = f.readline()
s.sendall(b"ping\n")
echo = f.readline()
s.close()
print("ok" if first == b"220 eager hello\r\n" and echo == b"echo ping\n" else f"first={first!r} echo={echo!r}")
PY
}
for how in tun socks http; do
    assert_eq ok "$(eager_run "$how")" "via $how: the early bytes, then the echo"
done
sleep 0.3
# 17 bytes of "220 eager hello\r\n" + 10 of "echo ping\n" = 27 down, 5 up
for inb in tun socks http; do
    assert_log "tcp $inb .* -> $SRV4:2727 policy=eager .*up=5 down=27 " "the $inb flow counts the early bytes: up=5 down=27"
done

check "a port tinyproxy does not allow: the flow fails at once, the status is logged"
t0=$(now)
rc=$(cli_py "$SRV4" 2600 <<'PY'
import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
    s.settimeout(5)
    print("eof" if s.recv(100) == b"" else "data")
except ConnectionResetError:
    print("reset")
except ConnectionRefusedError:
    print("refused")
except socket.timeout:
    print("timeout")
PY
)
secs=$(elapsed "$t0")
assert_match '^(eof|reset|refused)$' "$rc" "the client sees the failure (got $rc after ${secs}s)"
lt "$secs" 4 || fail "the refused CONNECT took ${secs}s"
assert_log "flow [0-9]+: connect $SRV4:2600: http: proxy answered 403" "the log line names the 403"
assert_log "-> $SRV4:2600 policy=tiny .*close=connect failed" "the flow line names the proxy"

check "wrong credentials: the flow fails at once, logged as an authentication failure"
t0=$(now)
rc=$(cli_curl -o /dev/null --max-time 8 "http://[$SRV6]:$HTTP_PORT/small" >/dev/null 2>&1; echo $?)
secs=$(elapsed "$t0")
[ "$rc" != 0 ] || fail "curl through tinyproxy with a wrong password succeeded"
lt "$secs" 4 || fail "the failed flow took ${secs}s"
assert_log "flow [0-9]+: connect \[fd20::2\]:$HTTP_PORT: http: (407|401) proxy authentication" "the log names the proxy's auth status"
assert_log "policy=tinybad .*close=connect failed" "the flow line names tinybad"

check "the other proxies are unaffected"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 10 "http://$SRV4:$HTTP_PORT/small")" "via tiny"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 10 "http://$SRV4:$ALT_PORT/small")" "via tinyauth"
chute_alive

# ---------------------------------------------------------------- https proxy
need_cmd openssl
check "an https proxy: TLS to the proxy (a python TLS front for tinyproxy), CONNECT inside"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=proxy.test" \
    -addext "subjectAltName=DNS:proxy.test,IP:$SRV4" \
    -keyout "$NETNS_TMP/proxy.key" -out "$NETNS_TMP/proxy.crt" >/dev/null 2>&1 || fail "openssl req"
cat >"$NETNS_TMP/tlsfront.py" <<'PY'
import socket, ssl, sys, threading
host, port, target, crt, key, ready = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:7]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.minimum_version = ssl.TLSVersion.TLSv1_2
ctx.load_cert_chain(crt, key)
def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            if isinstance(s, ssl.SSLSocket):
                s.unwrap()  # close_notify: a clean end, not a truncation
        except (OSError, ValueError):
            pass
        try:
            s.close()
        except OSError:
            pass
def serve(raw):
    try:
        c = ctx.wrap_socket(raw, server_side=True)
    except (OSError, ssl.SSLError) as e:
        print("handshake failed:", e, flush=True)
        return
    print("handshake ok", c.version(), flush=True)
    u = socket.create_connection((host, target))
    threading.Thread(target=pump, args=(c, u), daemon=True).start()
    pump(u, c)
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((host, port))
ls.listen(16)
open(ready, "w").write("ready\n")
while True:
    threading.Thread(target=serve, args=(ls.accept()[0],), daemon=True).start()
PY
bg_in "$NS_SRV" "$NETNS_TMP/tlsfront.log" "$PY" "$NETNS_TMP/tlsfront.py" "$SRV4" 3443 3128 \
    "$NETNS_TMP/proxy.crt" "$NETNS_TMP/proxy.key" "$NETNS_TMP/tlsfront.ready"
wait_file "$NETNS_TMP/tlsfront.ready" 10 || fail "the TLS front did not start"
tun_bundle <<LUA
chute.proxy "tinytls" { type = "https", server = "$SRV4", port = 3443, sni = "proxy.test",
                        skip_cert_verify = true }
chute.proxy "tinytls_checked" { type = "http", tls = true, server = "$SRV4", port = 3443,
                                sni = "proxy.test" }
function chute.route(flow)
  if flow.dst_port == $ALT_PORT then return "tinytls_checked" end
  return "tinytls"
end
LUA
kill -HUP "$CHUTE_PID"
assert_log "reloaded .*rule version 2" "chute reloaded the bundle"
assert_log "proxy tinytls: skip_cert_verify" "skip_cert_verify is warned about at load"
assert_eq "$SHA_1M" "$(cli_fetch_sha -H "Connection: close" --max-time 10 "http://$SRV4:$HTTP_PORT/1m.bin")" "1m.bin via the https proxy"
assert_log "policy=tinytls .*down=1048[0-9]{3} .*close=done" "the tinytls flow line"
grep -q "handshake ok" "$NETNS_TMP/tlsfront.log" || fail "the TLS front saw no handshake"
check "a self-signed proxy certificate without skip_cert_verify is refused"
rc=$(cli_curl -o /dev/null --max-time 8 "http://$SRV4:$ALT_PORT/small" >/dev/null 2>&1; echo $?)
[ "$rc" != 0 ] || fail "an untrusted https proxy was used"
check "the log says why (tls: ...)"
wait_log "flow [0-9]+: connect $SRV4:$ALT_PORT: tls: " 10 ||
    fail "the log says why (tls: ...): no line matches /flow N: connect $SRV4:$ALT_PORT: tls: /"
chute_alive
pass
