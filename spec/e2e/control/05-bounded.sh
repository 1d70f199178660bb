#!/usr/bin/env bash
# A slow or dead client cannot grow chute's memory: 200 idle WebSocket
# clients on /traffic and one /logs client that never reads while the log
# runs hot; chute drops the one that does not read, keeps the others, and
# its RSS stays bounded.
. "$(dirname "$0")/ctllib.bash"

ctl_init
ctl_bundle <<'LUA'
chute.group "pick" { type = "select", proxies = { "DIRECT", "REJECT" } }
function chute.route(flow) return "DIRECT" end
LUA
ctl_start
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$CHUTE_PID/status"; }
before=$(rss_kb)

python3 - "$CTL_PORT" "$SECRET" "$(dirname "$0")" >"$E2E_TMP/flood.out" 2>&1 <<'PY' &
import socket, sys, time
sys.path.insert(0, sys.argv[3])
import wsclient
port, secret = int(sys.argv[1]), sys.argv[2]
idle = [wsclient.connect(port, "/traffic?token=" + secret) for _ in range(200)]
# The one that never reads: a tiny receive window, and no recv() at all.
deaf = wsclient.connect(port, "/logs?level=info&token=" + secret, rcvbuf=4096)
print("connected", flush=True)
# The log runs hot: every select logs a line the deaf client is sent.
s = socket.create_connection(("127.0.0.1", port))
req = ("PUT /proxies/pick HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
       "Content-Length: 17\r\n\r\n{\"name\":\"DIRECT\"}" % secret).encode()
buf = b""
for i in range(40000):
    s.sendall(req)
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    buf = buf.split(b"\r\n\r\n", 1)[1]
print("selects done", flush=True)
# The idle ones still get their traffic messages.
ok = 0
for c in idle[:20]:
    c.settimeout(3)
    op, data = wsclient.read_message(c)
    ok += op == 1 and data.startswith(b'{"up"')
print("idle ok", ok, flush=True)
time.sleep(30)
PY
E2E_EXTRA_PIDS+=($!)
for _ in $(seq 900); do grep -q "idle ok" "$E2E_TMP/flood.out" && break; sleep 0.1; done
cat "$E2E_TMP/flood.out"
assert_match "idle ok 20" "$(cat "$E2E_TMP/flood.out")" "the idle WebSocket clients still get /traffic"
stats=$(api "$API/chute/stats")
assert_ge 1 "$(json 'j["control"]["dropped"]' <<<"$stats")" "chute dropped the client that does not read"
assert_ge 201 "$(json 'j["control"]["clients"]' <<<"$stats")" "the 200 idle clients are still connected"
after=$(rss_kb)
say "RSS before ${before} kB, after ${after} kB"
# ASan keeps freed memory in its quarantine (256 MB by default): a
# sanitizer build is held to that bound instead.
limit=49152
grep -q -a __asan_init "$CHUTE" && limit=$((320 * 1024))
check "RSS grew by less than $((limit / 1024)) MB"
[ $((after - before)) -lt "$limit" ] || fail "RSS grew from $before kB to $after kB"
assert_eq 200 "$(http_status -H "Authorization: Bearer $SECRET" "$API/version")" "the API still answers"
e2e_pass
