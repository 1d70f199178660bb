#!/usr/bin/env bash
# The secret guards every endpoint but the dashboard's files: without it
# or with a wrong one each answers 401, unknown endpoints too (nothing is
# revealed); Bearer and ?token= both work; CORS headers and the preflight;
# a non-loopback listen without a secret refuses to load; bad requests get
# 400/404/411/413/431 with a JSON message and the engine carries on.
. "$(dirname "$0")/ctllib.bash"

ctl_init
ctl_bundle <<'LUA'
chute.group "pick" { type = "select", proxies = { "DIRECT", "REJECT" } }
chute.group "auto" { type = "fallback", proxies = { "DIRECT" } }
function chute.route(flow) return "pick" end
LUA
ctl_start

ENDPOINTS="/ /version /configs /proxies /proxies/pick /connections /rules /providers/proxies
/providers/rules /metrics /chute/stats /no/such/thing"
for p in $ENDPOINTS; do
    assert_eq 401 "$(http_status "$API$p")" "GET $p without the secret: 401"
    assert_eq 401 "$(http_status -H 'Authorization: Bearer wrong' "$API$p")" "GET $p with a wrong secret: 401"
    assert_eq 401 "$(http_status "$API$p?token=e2e-s3creT")" "GET $p with a wrong ?token=: 401"
done
assert_eq 401 "$(http_status -X DELETE "$API/connections")" "DELETE /connections without the secret: 401"
assert_eq 401 "$(http_status -X PUT -d '{"name":"REJECT"}' "$API/proxies/pick")" "PUT /proxies/pick without the secret: 401"
assert_eq 401 "$(http_status "$API/traffic")" "GET /traffic without the secret: 401"
body=$(curl -s "$API/version")
assert_eq Unauthorized "$(json 'j["message"]' <<<"$body")" "the 401 body is Clash's {\"message\":\"Unauthorized\"}"

for p in / /version /configs /proxies /proxies/pick /connections /rules /providers/proxies /providers/rules /metrics /chute/stats; do
    assert_eq 200 "$(http_status -H "Authorization: Bearer $SECRET" "$API$p")" "GET $p with Bearer: 200"
done
assert_eq 200 "$(http_status "$API/version?token=$SECRET")" "GET /version?token=: 200"
assert_eq 200 "$(http_status "$API/ui/")" "GET /ui/ needs no secret (the page holds none)"
assert_eq 200 "$(http_status "$API/ui/app.js")" "GET /ui/app.js"

v=$(api "$API/version")
assert_match '"version": *"chute [0-9]' "$v" "GET /version: {\"version\":\"chute X\"}"
assert_eq '{"hello": "clash"}' "$(api "$API/" | json 'j')" "GET /: Clash's hello"
c=$(api "$API/configs")
assert_eq rule "$(json 'j["mode"]' <<<"$c")" "GET /configs: mode rule"
assert_eq info "$(json 'j["log-level"]' <<<"$c")" "GET /configs: log-level info"
assert_eq "True" "$(json '"socks-port" in j and "allow-lan" in j' <<<"$c")" "GET /configs: Clash's keys"

say "unknown endpoints and bad input"
r=$(api -w ' %{http_code}' "$API/no/such/thing")
assert_match '"message".* 404$' "$r" "an unknown endpoint: 404 with a JSON message"
assert_eq 404 "$(http_status -H "Authorization: Bearer $SECRET" "$API/proxies/nope")" "GET /proxies/nope: 404"
r=$(api -w ' %{http_code}' -X PATCH -d '{"mode": 5}' "$API/configs")
assert_match 'mode: expected a string.* 400$' "$r" "PATCH /configs {mode: 5}: 400 naming the field"
r=$(api -w ' %{http_code}' -X PATCH -d '{"mode": "sideways"}' "$API/configs")
assert_match 'sideways.* 400$' "$r" "PATCH /configs an unknown mode: 400"
r=$(api -w ' %{http_code}' -X PATCH -d '{"mode": ' "$API/configs")
assert_match 'not JSON.* 400$' "$r" "PATCH /configs with broken JSON: 400"
r=$(api -w ' %{http_code}' -X PUT -d '{"name":"hk"}' "$API/proxies/pick")
assert_match "no member 'hk'.*DIRECT, REJECT.* 400$" "$r" "selecting a member that does not exist: 400 with the members"
r=$(api -w ' %{http_code}' -X PUT -d '{"name":"DIRECT"}' "$API/proxies/auto")
assert_match "not a select group.* 400$" "$r" "selecting in a fallback group: 400 with the reason"
r=$(api -w ' %{http_code}' -X PUT -d '[1]' "$API/proxies/pick")
assert_match "expected a JSON object.* 400$" "$r" "a body that is not an object: 400"
big=$(head -c 20000 /dev/zero | tr '\0' a)
assert_eq 413 "$(http_status -H "Authorization: Bearer $SECRET" -X PATCH -d "{\"x\":\"$big\"}" "$API/configs")" "a 20 kB body: 413"
assert_eq 431 "$(http_status -H "Authorization: Bearer $SECRET" -H "X-Big: $big" "$API/version")" "a 20 kB header: 431"
r=$(printf 'GET /version HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n' | python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(sys.stdin.buffer.read())
print(s.recv(200).split(b"\r\n")[0].decode())' "$CTL_PORT")
assert_eq "HTTP/1.1 400 Bad Request" "$r" "a malformed head: 400"

say "CORS"
h=$(curl -s -D - -o /dev/null -H "Authorization: Bearer $SECRET" -H 'Origin: http://127.0.0.1:'"$CTL_PORT" "$API/version")
assert_match "Access-Control-Allow-Origin: http://127.0.0.1:$CTL_PORT" "$h" "default CORS origin: the API's own"
h=$(curl -s -D - -o /dev/null -X OPTIONS -H 'Origin: http://dash.example' -H 'Access-Control-Request-Method: PUT' "$API/proxies/pick")
assert_match "^HTTP/1.1 204" "$h" "a preflight needs no secret: 204"
assert_match "Access-Control-Allow-Headers: Authorization" "$h" "the preflight allows Authorization"

say "keep-alive: several requests on one connection"
r=$(curl -s -H "Authorization: Bearer $SECRET" -w '%{num_connects}\n' -o /dev/null "$API/version" -o /dev/null "$API/rules" -o /dev/null "$API/proxies" | paste -sd' ')
assert_eq "1 0 0" "$r" "three requests, one connection"

say "a flood of malformed requests: 400s, and the engine carries on"
python3 - "$CTL_PORT" <<'PY' || fail "the malformed flood did not get 400s"
import socket, sys
port = int(sys.argv[1])
bad = [b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"\x00\x01\x02\r\n\r\n", b"GET  HTTP/1.1\r\n\r\n"]
for i in range(400):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(bad[i % len(bad)])
    line = s.recv(100).split(b"\r\n")[0]
    s.close()
    if line != b"HTTP/1.1 400 Bad Request":
        sys.exit(f"request {i}: {line!r}")
PY
assert_eq "$SHA_SMALL" "$(fetch_sha -x "socks5h://127.0.0.1:$SOCKS_PORT" "http://localhost:$ORIGIN_PORT/small")" "a fetch through chute after the flood"
assert_eq 200 "$(http_status -H "Authorization: Bearer $SECRET" "$API/version")" "the API answers after the flood"

say "a non-loopback listen without a secret refuses to load"
mkdir -p "$E2E_TMP/open"
cat >"$E2E_TMP/open/main.lua" <<LUA
local chute = require "chute"
chute.config { listen = { socks = "127.0.0.1:$SOCKS_PORT" }, control = { listen = "0.0.0.0:$CTL_PORT" } }
LUA
out=$("$CHUTE" check "$E2E_TMP/open" 2>&1 || true)
assert_match 'main.lua:2: chute.config: control.listen "0.0.0.0:[0-9]+" is not a loopback address: give control.secret' "$out" "chute check names the file:line and the fix"
sed -i 's/listen = "0.0.0.0:\([0-9]*\)"/listen = "0.0.0.0:\1", secret = "x"/' "$E2E_TMP/open/main.lua"
assert_match '^ok' "$("$CHUTE" check "$E2E_TMP/open" 2>&1)" "with a secret it loads"
out=$(sed 's/secret = "x"/secret = 5/' "$E2E_TMP/open/main.lua" >"$E2E_TMP/open/m2" && mv "$E2E_TMP/open/m2" "$E2E_TMP/open/main.lua" && "$CHUTE" check "$E2E_TMP/open" 2>&1 || true)
assert_match 'control.secret: expected string, got integer' "$out" "a secret that is not a string"

e2e_pass
