#!/usr/bin/env bash
# GET /dns/query?name=&type= goes through chute's resolver (dnsmasq as its
# upstream) and answers in Clash's shape: Status, Question, Answer with
# name/type/TTL/data; NXDOMAIN is Status 3; a bad type is 400; a name whose
# upstream never answers gets Clash's 500 {"message":"context deadline
# exceeded"} after 5 s while the API (and the loop) go on answering.
. "$(dirname "$0")/ctllib.bash"
. "$(dirname "$0")/../dns/dnslib.bash"

ctl_init
dns_init
SILENT=$(e2e_ports 1) || fail "e2e_ports: no free port for the silent upstream"
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", int(sys.argv[1])))
time.sleep(120)' "$SILENT" &
E2E_EXTRA_PIDS+=("$!")
upstream_start --host-record=both.test.example,10.1.2.5,fd00::5,300 \
    --txt-record=txt.test.example,'v=spf1 -all' --mx-host=test.example,mx.test.example,10 \
    --address=/nx.test.example/ --server=/slow.test.example/127.0.0.1#"$SILENT"
ctl_bundle "  dns = { upstream = { \"127.0.0.1:$UP_PORT\" }, timeout = 3 }," <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
ctl_start

q=$(api "$API/dns/query?name=both.test.example&type=AAAA")
assert_eq 0 "$(json 'j["Status"]' <<<"$q")" "AAAA both.test.example: Status 0 (NOERROR)"
assert_eq '[{"Name": "both.test.example.", "Qtype": 28, "Qclass": 1}]' "$(json 'j["Question"]' <<<"$q")" \
    "Question as Clash's (miekg's field names)"
assert_eq 'fd00::5 28 both.test.example.' "$(json '" ".join(str(a[k]) for a in j["Answer"] for k in ("data","type","name"))' <<<"$q")" \
    "Answer: data, type, name"
ttl=$(json 'j["Answer"][0]["TTL"]' <<<"$q")
[ "$ttl" -gt 200 ] && [ "$ttl" -le 300 ] || fail "TTL '$ttl', expected dnsmasq's 300 (or a little less)"
assert_eq "True True" "$(json 'str(j["RD"]) + " " + str(j["RA"])' <<<"$q")" "RD and RA set"
assert_eq 10.1.2.5 "$(api "$API/dns/query?name=both.test.example" | json 'j["Answer"][0]["data"]')" \
    "type defaults to A"
assert_eq '"v=spf1 -all"' "$(api "$API/dns/query?name=txt.test.example&type=TXT" | json 'j["Answer"][0]["data"]')" \
    "TXT data quoted, as a zone file"
assert_eq '10 mx.test.example.' "$(api "$API/dns/query?name=test.example&type=MX" | json 'j["Answer"][0]["data"]')" \
    "MX data: preference and host"
nx=$(api "$API/dns/query?name=nx.test.example")
assert_eq 3 "$(json 'j["Status"]' <<<"$nx")" "NXDOMAIN: Status 3"
assert_eq False "$(json 'str("Answer" in j)' <<<"$nx")" "and no Answer key (Clash leaves it out)"
assert_eq 400 "$(http_status -H "Authorization: Bearer $SECRET" "$API/dns/query?name=x.test.example&type=BOGUS")" \
    "a bad type: 400"
assert_eq 400 "$(http_status -H "Authorization: Bearer $SECRET" "$API/dns/query")" "no name: 400"
assert_eq 401 "$(http_status "$API/dns/query?name=both.test.example")" "without the secret: 401"

say "an upstream that never answers: Clash's deadline error, the loop unblocked"
t0=$(now)
api -o "$E2E_TMP/slow.json" -w '%{http_code}' "$API/dns/query?name=x.slow.test.example" >"$E2E_TMP/slow.code" &
SLOW=$!
sleep 0.5
t1=$(now)
assert_eq 200 "$(http_status -H "Authorization: Bearer $SECRET" "$API/version")" "meanwhile the API answers"
check "within 1 s of asking ($(elapsed "$t1")s)"
awk -v t="$(elapsed "$t1")" "BEGIN { exit !(t < 1) }" || fail "GET /version took $(elapsed "$t1")s while a DNS query waited"
wait "$SLOW"
assert_eq 500 "$(cat "$E2E_TMP/slow.code")" "the slow query: 500"
assert_eq "context deadline exceeded" "$(json 'j["message"]' <"$E2E_TMP/slow.json")" "with Clash's message"
took=$(elapsed "$t0")
check "after Clash's 5 s deadline (${took}s)"
awk -v t="$took" 'BEGIN { exit !(t >= 4.8 && t < 7) }' || fail "the deadline answer came after ${took}s, expected ~5"
chute_alive
e2e_pass
