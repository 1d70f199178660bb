#!/usr/bin/env bash
# GET /proxies in Clash's shape; PUT /proxies/GROUP selects a member and the
# next flow uses it; the delay test; PATCH /configs mode and log-level;
# PUT /configs reloads; /metrics is Prometheus text; chute ctl select,
# reload, status, logs.
. "$(dirname "$0")/ctllib.bash"

ctl_init
ctl_bundle <<'LUA'
chute.group "pick" { type = "select", proxies = { "DIRECT", "REJECT" } }
function chute.route(flow) return "pick" end
LUA
ctl_start
SOCKS="socks5h://127.0.0.1:$SOCKS_PORT"
CTL=("$CHUTE" ctl --addr "127.0.0.1:$CTL_PORT" --secret "$SECRET")

p=$(api "$API/proxies")
assert_eq '{"name": "pick", "type": "Selector", "udp": false, "alive": true, "history": [], "all": ["DIRECT", "REJECT"], "now": "DIRECT"}' \
    "$(json 'j["proxies"]["pick"]' <<<"$p")" "GET /proxies: the select group as Clash shows one"
assert_eq "Direct" "$(json 'j["proxies"]["DIRECT"]["type"]' <<<"$p")" "DIRECT is listed, type Direct"
assert_eq "True" "$(json '"pick" in j["proxies"]["GLOBAL"]["all"]' <<<"$p")" "GLOBAL lists every policy"
assert_eq "$SHA_SMALL" "$(fetch_sha -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")" "DIRECT first: the fetch works"

say "select REJECT: the next flow is refused"
assert_eq 204 "$(http_status -H "Authorization: Bearer $SECRET" -X PUT -d '{"name":"REJECT"}' "$API/proxies/pick")" "PUT /proxies/pick {name: REJECT}: 204"
assert_eq REJECT "$(api "$API/proxies/pick" | json 'j["now"]')" "GET /proxies/pick: now REJECT"
assert_eq 97 "$(curl_rc -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")" "the next flow is refused (curl 97)"
assert_log "rejected by the group.s choice" "its log says the group rejected it"

say "chute ctl select back to DIRECT"
assert_eq selected "$("${CTL[@]}" select pick DIRECT)" "chute ctl select pick DIRECT"
assert_eq "$SHA_SMALL" "$(fetch_sha -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")" "the next flow goes DIRECT"
out=$("${CTL[@]}" select pick hk 2>&1 || true)
assert_match "400 group 'pick' has no member 'hk'" "$out" "chute ctl select of an unknown member says why"

say "the delay test"
d=$(api "$API/proxies/DIRECT/delay?url=http://127.0.0.1:$ORIGIN_PORT/small&timeout=3000")
assert_match '^\{"delay":[0-9]+\}$' "$d" "GET /proxies/DIRECT/delay: {delay: ms}"
d=$(api "$API/proxies/pick/delay?url=http://127.0.0.1:$ORIGIN_PORT/small&timeout=3000")
assert_match '^\{"delay":[0-9]+\}$' "$d" "GET /proxies/pick/delay goes through the group's member"
g=$(api "$API/group/pick/delay?url=http://127.0.0.1:$ORIGIN_PORT/small&timeout=3000")
assert_match '^\{"DIRECT":[0-9]+\}$' "$g" "GET /group/pick/delay: each member that answered (REJECT left out)"
assert_eq 404 "$(http_status -H "Authorization: Bearer $SECRET" "$API/group/DIRECT/delay")" "GET /group/DIRECT/delay: not a group, 404"
dead=$(e2e_ports 1)
r=$(api -w ' %{http_code}' "$API/proxies/DIRECT/delay?url=http://127.0.0.1:$dead/&timeout=2000")
assert_match ' 50[34]$' "$r" "a delay test to a closed port: 503/504"
assert_eq 400 "$(http_status -H "Authorization: Bearer $SECRET" "$API/proxies/DIRECT/delay?url=ftp://x/")" "a delay test with an ftp url: 400"

say "PATCH /configs: mode direct overrides the script, log-level"
assert_eq 204 "$(http_status -H "Authorization: Bearer $SECRET" -X PUT -d '{"name":"REJECT"}' "$API/proxies/pick")" "select REJECT again"
assert_eq 204 "$(http_status -H "Authorization: Bearer $SECRET" -X PATCH -d '{"mode":"direct","log-level":"debug"}' "$API/configs")" "PATCH /configs {mode: direct, log-level: debug}: 204"
c=$(api "$API/configs")
assert_eq "direct debug" "$(json 'j["mode"] + " " + j["log-level"]' <<<"$c")" "GET /configs shows both"
assert_eq "$SHA_SMALL" "$(fetch_sha -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")" "mode direct: the flow goes DIRECT"
assert_log 'policy=DIRECT rule="mode direct"' "its flow line: rule=\"mode direct\""
r=$(api -w ' %{http_code}' -X PATCH -d '{"mode":"global"}' "$API/configs")
assert_match 'GLOBAL.* 400$' "$r" "mode global without a GLOBAL group: 400 with the reason"
assert_eq 204 "$(http_status -H "Authorization: Bearer $SECRET" -X PATCH -d '{"mode":"rule","log-level":"info"}' "$API/configs")" "back to mode rule"
assert_eq 97 "$(curl_rc -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")" "mode rule: the script's group (REJECT) again"

say "/metrics"
api "$API/metrics" >"$E2E_TMP/metrics"
python3 - "$E2E_TMP/metrics" <<'PY' || fail "/metrics is not Prometheus text: $(head -c 800 "$E2E_TMP/metrics")"
import re, sys
sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? -?[0-9.e+]+$')
seen, types = {}, {}
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("# TYPE "):
        _, _, name, kind = line.split(" ")
        assert kind in ("counter", "gauge"), line
        assert name not in types, "TYPE twice: " + name
        types[name] = kind
        continue
    assert not line.startswith("#"), line
    assert sample.match(line), "bad sample line: " + line
    name = re.split(r"[{ ]", line)[0]
    assert name in types, "sample before its TYPE: " + line
    seen[line.split(" ")[0]] = float(line.rsplit(" ", 1)[1])
assert seen["chute_flows_total"] >= 5, seen
assert seen["chute_route_calls"] >= 1, seen
assert seen['chute_group_selected{group="pick",member="REJECT"}'] == 1, seen
assert seen['chute_group_selected{group="pick",member="DIRECT"}'] == 0, seen
assert seen['chute_proxy_up{name="DIRECT",type="Direct"}'] == 1, seen
assert types["chute_flows_active"] == "gauge" and types["chute_flows_total"] == "counter"
assert seen["chute_dcache_misses"] >= 1 and types["chute_dcache_capacity"] == "gauge", seen
PY
check "/metrics parses as Prometheus text, with flows, routes and the group's choice"

say "/chute/<section>: the counters Clash has not"
st=$(api "$API/chute/stats")
dc=$(api "$API/chute/dcache")
assert_eq "$(json 'j["sections"]["dcache"]["dcache_misses"]' <<<"$st")" "$(json 'j["dcache_misses"]' <<<"$dc")" \
    "GET /chute/dcache is /chute/stats's dcache section"
assert_eq True "$(json 'j["dcache_misses"] >= 1 and j["dcache_capacity"] > 0' <<<"$dc")" "the decision cache missed and has room"
assert_eq "$(json 'j["counters"]["flows_total"]' <<<"$st")" "$(json 'j["sections"]["flows"]["flows_total"]' <<<"$st")" \
    "the flat counters and the sections agree"
assert_eq 404 "$(http_status -H "Authorization: Bearer $SECRET" "$API/chute/mitm")" "/chute/mitm without a MITM: 404"
assert_eq 404 "$(http_status -H "Authorization: Bearer $SECRET" "$API/chute/lwip")" "/chute/lwip without a TUN: 404"

say "chute ctl status, logs, reload; PUT /configs"
assert_match "^chute 0\.[0-9.]+ at 127\.0\.0\.1:$CTL_PORT" "$("${CTL[@]}" status)" "chute ctl status: the version"
assert_match "flows_total=[0-9]+ " "$("${CTL[@]}" status)" "chute ctl status: the counters"
"${CTL[@]}" logs info >"$E2E_TMP/ctl-logs" 2>&1 &
E2E_EXTRA_PIDS+=($!)
sleep 0.5
assert_match "reload requested" "$("${CTL[@]}" reload)" "chute ctl reload"
assert_log " info  reloaded " "the bundle was reloaded"
assert_eq 204 "$(http_status -H "Authorization: Bearer $SECRET" -X PUT -d '{}' "$API/configs")" "PUT /configs: 204"
wait_log_count " info  reloaded " 2 >/dev/null
for _ in $(seq 30); do grep -q "reloaded" "$E2E_TMP/ctl-logs" && break; sleep 0.1; done
assert_match "^info +reloaded " "$(cat "$E2E_TMP/ctl-logs")" "chute ctl logs follows the log"
out=$("$CHUTE" ctl --addr "127.0.0.1:$CTL_PORT" status 2>&1 || true)
assert_match "401 Unauthorized: give --secret" "$out" "chute ctl without the secret says what to do"
e2e_pass
