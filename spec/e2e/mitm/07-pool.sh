#!/usr/bin/env bash
# The MITM's idle HTTP/1 origin connections (root; mitm/h1_pool.c): one
# client connection after another reuses the same origin connection (nginx
# logs its connection number), without a second upstream handshake; idle
# clients hold none once 4 s have passed (the origin sees them close,
# stats count them), and their next request opens a new one.
. "$(dirname "$0")/mitmlib.bash"
need_root
mitm_env_up '  mitm = { hosts = { "test.example" } },' <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
# The origin's established connections from chute (the TUN namespace's
# upstream side runs in the host namespace: nginx's view counts them).
origin_conns() {
    ip netns exec "$NS_SRV" ss -Htn state established "( sport = :443 )" | wc -l
}
conn_of() {
    grep -F "GET $1 " "$NETNS_TMP/tls-access.log" | tail -n 1 | sed -n 's/.* conn=\([0-9]*\).*/\1/p'
}

say "two client connections in a row: the second request rides the first's origin connection"
mcurl -o /dev/null https://test.example/echo?pool=1 || fail "the first request"
mcurl -o /dev/null https://test.example/echo?pool=2 || fail "the second request"
c1=$(conn_of "/echo?pool=1") c2=$(conn_of "/echo?pool=2")
[ -n "$c1" ] || fail "nginx logged no connection number for the first request"
assert_eq "$c1" "$c2" "one origin connection for two client connections"
stats_read
assert_ge 2 "$S_mitm_h1_upstream_reused" "mitm_h1_upstream_reused counts both requests"
assert_ge 2 "$S_mitm_h1_upstream_parked" "mitm_h1_upstream_parked"

say "idle clients: their origin connections close after 4 s, the clients stay"
cat >"$NETNS_TMP/idle.py" <<'PY'
import socket, ssl, sys, time
ctx = ssl.create_default_context(cafile=sys.argv[2])

def get(c, path):
    """One request on |c|; its status line, after the whole response."""
    c.sendall(b"GET %s HTTP/1.1\r\nHost: test.example\r\n\r\n" % path.encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d:
            return "closed"
        buf += d
    head, body = buf.split(b"\r\n\r\n", 1)
    n = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
    while n and len(body) < n[0]:
        body += c.recv(65536)
    return head.split(b"\r\n")[0].decode()

socks = []
for i in range(int(sys.argv[3])):
    c = ctx.wrap_socket(socket.create_connection((sys.argv[1], 443), timeout=10),
                        server_hostname="test.example")
    get(c, "/echo?idle=%d" % i)
    socks.append(c)
print("ready", flush=True)
time.sleep(7)
# Still usable: a request on every one, each answered.
got = [get(c, "/echo?again=%d" % i) for i, c in enumerate(socks)]
print("\n".join(g for g in got if " 200 " not in g))
print("answered", sum(" 200 " in g for g in got), flush=True)
PY
ip netns exec "$NS_CLI" "$PY" "$NETNS_TMP/idle.py" "$SRV4" "$CHUTE_CA" 20 >"$NETNS_TMP/idle.out" 2>"$NETNS_TMP/idle.err" &
cpid=$!
for _ in $(seq 100); do grep -q ready "$NETNS_TMP/idle.out" && break; sleep 0.1; done
grep -q ready "$NETNS_TMP/idle.out" || fail "the idle clients did not connect: $(cat "$NETNS_TMP/idle.out")"
assert_ge 1 "$(origin_conns)" "while fresh, the pool holds origin connections"
sleep 5.5
assert_eq 0 "$(origin_conns)" "4 s later, 20 idle clients hold no origin connection"
stats_read
assert_eq 0 "$S_mitm_h1_upstream_idle" "mitm_h1_upstream_idle"
assert_ge 1 "$S_mitm_h1_upstream_purged" "mitm_h1_upstream_purged"

wait "$cpid" || fail "the idle clients: $(cat "$NETNS_TMP/idle.out" "$NETNS_TMP/idle.err")"
assert_match "answered 20" "$(tail -n 1 "$NETNS_TMP/idle.out")" "every idle client's next request is answered"
chute_alive
pass
