#!/usr/bin/env bash
# A wrong Shadowsocks password is said, counted and acted on. ss-server
# meets a key it cannot open with silence (probe resistance), so the only
# sign is none: 5 s after the request with no byte back, chute logs
#   no byte from proxy 'hk' in 5.0 s after the request: wrong password or cipher?
# (at warn once, then at debug until the proxy answers again), counts it
# (proxy_silent; the proxy's own count in the control API), and marks the
# proxy down: the fallback group "auto" {hk, DIRECT} sends the next flow
# DIRECT, and a health check through "hk2" (wrong password too) says why
# it failed. The silent flow itself is not cut: a slow server may answer.
. "$(dirname "$0")/outlib.bash"
need_root
need_cmd ss-server
netns_setup
servers_start http

ss_start 8501 aes-256-gcm "right-pw"
CHECK_URL="http://$SRV4:$HTTP_PORT/small"
CTL=127.0.0.1:9190
tun_bundle "  control = { listen = \"$CTL\" }," <<LUA
local function ss(pw)
  return { type = "shadowsocks", server = "$SRV4", port = 8501, cipher = "aes-256-gcm", password = pw }
end
chute.proxy "hk" (ss("wrong-pw"))
chute.proxy "hk2" (ss("wrong-pw"))
chute.proxy "good" (ss("right-pw"))
chute.group "auto" { type = "fallback", proxies = { "hk", "DIRECT" } }
chute.group "checked" { type = "fallback", proxies = { "hk2", "good" }, url = "$CHECK_URL",
                        interval = 30, timeout = 3 }
function chute.route(flow)
  if flow.dst_port == $ALT_PORT then return "checked" end
  return "auto"
end
LUA
CHUTE_RUN_ARGS="--log-level debug" tun_chute_start

stats_read A
assert_eq 0 "$A_proxy_silent" "proxy_silent at start"

check "a flow through the wrong password: the silence is said after 5 s, the flow is not cut"
t0=$(now)
rc=$(cli_curl -o /dev/null --max-time 7 "http://$SRV4:$HTTP_PORT/small" >/dev/null 2>&1; echo $?)
say "curl rc=$rc after $(elapsed "$t0") s"
[ "$rc" = 28 ] || fail "curl through the wrong password: rc $rc, want 28 (its own timeout: chute keeps the flow)"
assert_log "warn  no byte from proxy 'hk' in 5\.0 s after the request: wrong password or cipher\?$" "the silence is said"
assert_eq 1 "$(log_count "no byte from proxy 'hk'")" "lines about hk's silence"
stats_read B
assert_eq 1 "$B_proxy_silent" "proxy_silent after one silent flow"

check "hk is down in 'auto': the next flow goes DIRECT and works"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 5 "http://$SRV4:$HTTP_PORT/small")" "the next flow's body"
assert_log "group 'auto': now 'DIRECT', was 'hk' \(down: no answer to the request: wrong password or cipher\?\)" "the switch is said at info, with the reason"
assert_log "policy=auto via=DIRECT " "the second flow's line"

check "the health check through hk2 says why it failed, and 'checked' uses 'good'"
wait_log "health: group 'checked' via 'hk2': down: no answer to the request: wrong password or cipher\?" 6 ||
    fail "no health-check line for hk2: $(grep "health:" "$CHUTE_LOG" | tail -n 3)"
assert_log "health: group 'checked' via 'good': up, [0-9]+ ms" "the good member's check"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 5 "http://$SRV4:$ALT_PORT/small")" "a flow through 'checked'"
assert_log "policy=checked via=good " "it went through 'good'"

check "the control API's proxy view counts hk's silent requests"
json=$(cli_curl --max-time 5 "http://$CTL/proxies/hk")
say "$json"
assert_match '"silent": *1' "$json" "hk's silent count"
assert_match '"alive": *false' "$json" "hk is not alive"

chute_alive
pass
