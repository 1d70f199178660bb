#!/usr/bin/env bash
# /providers in mihomo's shapes against a running chute: a chute.provider
# served by nginx (its proxies listed once fetched) and a remote rule set
# (ruleCount, behavior, updatedAt); PUT /providers/rules/NAME fetches now,
# long before its interval, and the new list decides the next flow;
# unknown names are 404s.
. "$(dirname "$0")/ctllib.bash"

ctl_init
export CHUTE_STATE_DIR=$E2E_TMP/state
U=http://127.0.0.1:$ORIGIN_PORT
cat >"$WWW/sub.txt" <<EOF2
socks5://127.0.0.1:1#node-a
socks5://127.0.0.1:2#node-b
EOF2
printf 'a.test\n' >"$WWW/ads.txt"
ctl_bundle <<LUA
chute.provider "sub" { url = "$U/sub.txt", interval = 3600 }
local ads = chute.ruleset { url = "$U/ads.txt", format = "domain", interval = 86400, path = "ads" }
chute.group "g" { type = "select", use = { "sub" } }
function chute.route(flow)
  if ads:match(flow) then return "REJECT" end
  return "DIRECT"
end
LUA
ctl_start

check "the first fetches land (the bundle reloads with them)"
assert_log "provider sub: fetched" "sub fetched" 10
assert_log "ruleset ads: fetched" "ads fetched" 10
assert_log "reloaded .*rule version" "the reload" 10
for _ in $(seq 50); do
    [ "$(api "$API/providers/proxies" | json 'len(j["providers"]["sub"]["proxies"])')" = 2 ] && break
    sleep 0.1
done

p=$(api "$API/providers/proxies")
assert_eq '["node-a", "node-b"]' "$(json '[x["name"] for x in j["providers"]["sub"]["proxies"]]' <<<"$p")" "GET /providers/proxies: sub's two proxies"
assert_eq "Proxy HTTP Socks5" "$(json 'j["providers"]["sub"]["type"] + " " + j["providers"]["sub"]["vehicleType"] + " " + j["providers"]["sub"]["proxies"][0]["type"]' <<<"$p")" "its type, vehicleType and a proxy's type"
assert_match '^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$' "$(json 'j["providers"]["sub"]["updatedAt"]' <<<"$p")" "its updatedAt"
assert_eq 1 "$(json 'len(j["providers"])' <<<"$p")" "the rule set is not a provider of proxies"
assert_eq "sub" "$(api "$API/providers/proxies/sub" | json 'j["name"]')" "GET /providers/proxies/sub"
assert_eq 404 "$(http_status -H "Authorization: Bearer $SECRET" "$API/providers/proxies/nope")" "an unknown provider: 404"

r=$(api "$API/providers/rules")
assert_eq "Rule domain text 1" "$(json 'j["providers"]["ads"]["type"] + " " + j["providers"]["ads"]["behavior"] + " " + j["providers"]["ads"]["format"] + " " + str(j["providers"]["ads"]["ruleCount"])' <<<"$r")" "GET /providers/rules: ads, a domain list of 1"
assert_eq REJECT "$(decided a.test)" "a.test is rejected"
assert_eq DIRECT "$(decided b.test)" "b.test is not"

check "PUT /providers/rules/ads fetches now (its interval is a day)"
sleep 1.1 # a new Last-Modified second
printf 'b.test\nc.test\n' >"$WWW/ads.txt"
n=$(log_count "reloaded .*rule version")
assert_eq 204 "$(http_status -H "Authorization: Bearer $SECRET" -X PUT "$API/providers/rules/ads")" "PUT /providers/rules/ads: 204"
assert_log "control: ruleset ads: fetching now" "the refresh is logged"
for _ in $(seq 100); do
    [ "$(log_count "reloaded .*rule version")" -gt "$n" ] && break
    sleep 0.1
done
assert_eq REJECT "$(decided b.test)" "b.test is rejected by the new list"
assert_eq DIRECT "$(decided a.test)" "a.test is not any more"
assert_eq 2 "$(api "$API/providers/rules" | json 'j["providers"]["ads"]["ruleCount"]')" "ruleCount follows: 2"
assert_eq 204 "$(http_status -H "Authorization: Bearer $SECRET" -X PUT "$API/providers/proxies/sub")" "PUT /providers/proxies/sub: 204"
assert_log "control: provider sub: fetching now" "its refresh is logged"
assert_eq 404 "$(http_status -H "Authorization: Bearer $SECRET" -X PUT "$API/providers/rules/nope")" "an unknown rule set: 404"
assert_eq 401 "$(http_status -X PUT "$API/providers/rules/ads")" "PUT without the secret: 401"
e2e_pass
