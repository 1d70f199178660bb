#!/usr/bin/env bash
# /traffic, /memory and /logs stream one JSON object a line over chunked
# HTTP and as WebSocket messages; /traffic shows the bytes of a download
# running through chute; /connections over WebSocket pushes the list.
. "$(dirname "$0")/ctllib.bash"
WS="python3 $(dirname "$0")/wsclient.py"

ctl_init --big
ctl_bundle <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
ctl_start

say "a download at 5 MB/s through chute, while /traffic streams"
slow_download a 5M
wait_flows 1
curl -s -N --max-time 4 -H "Authorization: Bearer $SECRET" "$API/traffic" >"$E2E_TMP/traffic.chunked" || true
check "chunked /traffic: one {up, down} object a line, some with download bytes"
python3 - "$E2E_TMP/traffic.chunked" <<'PY' || fail "chunked /traffic: $(cat "$E2E_TMP/traffic.chunked")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(lines) >= 3, lines
assert all(set(l) == {"up", "down"} for l in lines), lines
assert max(l["down"] for l in lines) >= 1_000_000, lines
PY
$WS "$CTL_PORT" "/traffic?token=$SECRET" 3.5 >"$E2E_TMP/traffic.ws"
check "WebSocket /traffic: messages with the download's bytes"
python3 - "$E2E_TMP/traffic.ws" <<'PY' || fail "WebSocket /traffic: $(cat "$E2E_TMP/traffic.ws")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(lines) >= 2 and max(l["down"] for l in lines) >= 1_000_000, lines
PY
check "WebSocket without the token: refused before the upgrade"
out=$($WS "$CTL_PORT" "/traffic" 1 2>&1 || true)
assert_match "no upgrade: HTTP/1.1 401" "$out" "a WebSocket without the secret gets 401"

$WS "$CTL_PORT" "/connections?token=$SECRET" 1.5 >"$E2E_TMP/conns.ws"
check "WebSocket /connections: the Clash object with the live flow"
python3 - "$E2E_TMP/conns.ws" <<'PY' || fail "WebSocket /connections: $(head -c 600 "$E2E_TMP/conns.ws")"
import json, sys
m = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert m and m[0]["connections"] and m[0]["connections"][0]["metadata"]["host"] == "localhost", m
PY

m=$(curl -s -N --max-time 1.5 -H "Authorization: Bearer $SECRET" "$API/memory" | head -n 1 || true)
assert_match '^\{"inuse":[1-9][0-9]*,"oslimit":0\}$' "$m" "chunked /memory: {inuse, oslimit}"
m=$($WS "$CTL_PORT" "/memory?token=$SECRET" 1.2 | head -n 1 || true)
assert_match '"inuse":[1-9]' "$m" "WebSocket /memory"

say "/logs streams the flow lines"
curl -s -N --max-time 6 -H "Authorization: Bearer $SECRET" "$API/logs?level=info" >"$E2E_TMP/logs.chunked" &
E2E_EXTRA_PIDS+=($!)
$WS "$CTL_PORT" "/logs?level=info&token=$SECRET" 4 >"$E2E_TMP/logs.ws" &
E2E_EXTRA_PIDS+=($!)
sleep 1
fetch_sha -x "socks5h://127.0.0.1:$SOCKS_PORT" "http://localhost:$ORIGIN_PORT/small" >/dev/null
for _ in $(seq 40); do grep -q 'flow [0-9]* tcp socks' "$E2E_TMP/logs.ws" && grep -q 'flow [0-9]* tcp socks' "$E2E_TMP/logs.chunked" && break; sleep 0.1; done
assert_match '^\{"type":"info","payload":"flow [0-9]+ tcp socks .*-> localhost:'"$ORIGIN_PORT"' ' "$(cat "$E2E_TMP/logs.chunked")" "chunked /logs: the flow's close line"
assert_match '"type":"info","payload":"flow [0-9]+ tcp socks' "$(cat "$E2E_TMP/logs.ws")" "WebSocket /logs: the flow's close line"
assert_eq 400 "$(http_status -H "Authorization: Bearer $SECRET" "$API/logs?level=loud")" "/logs?level=loud: 400"
e2e_pass
