#!/usr/bin/env bash
# GET /connections lists live flows in Clash's shape; DELETE /connections/ID
# ends one download while a second one through chute carries on; DELETE
# /connections ends them all; chute ctl flows/close do the same.
. "$(dirname "$0")/ctllib.bash"

ctl_init --big
ctl_bundle <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
ctl_start

slow_download a 2M
A=$DL_PID
slow_download b 2M
B=$DL_PID
wait_flows 2
body=$(api "$API/connections")
say "check the Clash shape of GET /connections"
printf '%s' "$body" >"$E2E_TMP/conns.json"
python3 - "$ORIGIN_PORT" "$SOCKS_PORT" "$E2E_TMP/conns.json" <<'PY' || fail "GET /connections is not Clash's shape: $body"
import json, sys
j = json.load(open(sys.argv[3]))
origin, socks = sys.argv[1], sys.argv[2]
for k, t in [("downloadTotal", int), ("uploadTotal", int), ("connections", list), ("memory", int)]:
    assert isinstance(j[k], t), k
assert len(j["connections"]) == 2, j
for c in j["connections"]:
    assert isinstance(c["id"], str) and c["id"].isdigit(), c["id"]
    m = c["metadata"]
    for k in ["network", "type", "sourceIP", "destinationIP", "sourcePort", "destinationPort", "host",
              "dnsMode", "processPath"]:
        assert isinstance(m[k], str), k
    assert m["network"] == "tcp" and m["type"] == "SOCKS5", m
    assert m["host"] == "localhost" and m["destinationPort"] == origin, m
    assert m["sourceIP"] == "127.0.0.1" and m["sourcePort"].isdigit(), m
    assert m["inboundPort"] == socks, m
    assert isinstance(c["upload"], int) and c["upload"] > 0, c
    assert isinstance(c["download"], int), c
    assert c["start"].endswith("Z") and "T" in c["start"], c["start"]
    assert c["chains"] == ["DIRECT"], c["chains"]
    assert c["rule"] in ("route", "route (cached)") and c["rulePayload"] == "", c
PY
ids=$(json '" ".join(c["id"] for c in j["connections"])' <<<"$body")
read -r ID1 ID2 <<<"$ids"
assert_match "$ID1 +tcp +SOCKS5 +127\.0\.0\.1:[0-9]+ +localhost:$ORIGIN_PORT +DIRECT" \
    "$("$CHUTE" ctl --addr "127.0.0.1:$CTL_PORT" --secret "$SECRET" flows)" "chute ctl flows lists the flow"

say "DELETE /connections/$ID1 while both downloads run"
assert_eq 204 "$(http_status -H "Authorization: Bearer $SECRET" -X DELETE "$API/connections/$ID1")" "DELETE /connections/$ID1: 204"
assert_log "flow $ID1 tcp socks .*close=closed by control" "flow $ID1's close line says closed by control"
for _ in $(seq 50); do [ -f "$E2E_TMP/a.rc" ] || [ -f "$E2E_TMP/b.rc" ] && break; sleep 0.1; done
sleep 0.5
check "exactly one download ended, with a curl error"
[ -f "$E2E_TMP/a.rc" ] || [ -f "$E2E_TMP/b.rc" ] || fail "no download ended after the DELETE"
[ -f "$E2E_TMP/a.rc" ] && [ -f "$E2E_TMP/b.rc" ] && fail "both downloads ended; only one was closed"
ended=$(cat "$E2E_TMP"/*.rc)
[ "$ended" != 0 ] || fail "the closed download ended cleanly (exit 0): it was not cut"
left=$(api "$API/connections" | json '[c["id"] for c in j["connections"]]')
assert_eq "[\"$ID2\"]" "$left" "the other flow is still listed"
assert_eq 404 "$(http_status -H "Authorization: Bearer $SECRET" -X DELETE "$API/connections/$ID1")" "DELETE of a closed flow: 404"
assert_eq 404 "$(http_status -H "Authorization: Bearer $SECRET" -X DELETE "$API/connections/abc")" "DELETE of a bad id: 404"

say "chute ctl close ID"
assert_eq closed "$("$CHUTE" ctl --addr "127.0.0.1:$CTL_PORT" --secret "$SECRET" close "$ID2")" "chute ctl close $ID2"
assert_log "flow $ID2 tcp socks .*close=closed by control" "flow $ID2's close line"

say "DELETE /connections closes every flow"
slow_download c 2M
slow_download d 2M
wait_flows 2
assert_eq 204 "$(http_status -H "Authorization: Bearer $SECRET" -X DELETE "$API/connections")" "DELETE /connections: 204"
for _ in $(seq 50); do [ "$(api "$API/connections" | json 'len(j["connections"])')" = 0 ] && break; sleep 0.1; done
assert_eq 0 "$(api "$API/connections" | json 'len(j["connections"])')" "no flow is left"
assert_eq "$SHA_SMALL" "$(fetch_sha -x "socks5h://127.0.0.1:$SOCKS_PORT" "http://localhost:$ORIGIN_PORT/small")" "new flows still work"
e2e_pass
