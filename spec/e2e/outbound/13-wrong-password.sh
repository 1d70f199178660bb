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
# A slow destination behind a working proxy is no wrong password: the
# proxy answers other flows meanwhile, so its silence is only said at
# debug, not counted, and the proxy stays up.
. "$(dirname "$0")/outlib.bash"
need_root
need_cmd ss-server
netns_setup
servers_start http

ss_start 8501 aes-256-gcm "right-pw"
# :9300 answers 6.5 s after the request, :9301 at once.
cat >"$NETNS_TMP/slow.py" <<'PY'
import socket, sys, threading, time
def serve(c, delay):
    c.recv(4096)
    time.sleep(delay)
    c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
    c.close()
def listen(port, delay):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((sys.argv[1], port))
    ls.listen(16)
    while True:
        threading.Thread(target=serve, args=(ls.accept()[0], delay), daemon=True).start()
threading.Thread(target=listen, args=(9300, 6.5), daemon=True).start()
threading.Thread(target=listen, args=(9301, 0), daemon=True).start()
open(sys.argv[2], "w").write("ready\n")
threading.Event().wait()
PY
bg_in "$NS_SRV" "$NETNS_TMP/slow.log" "$PY" "$NETNS_TMP/slow.py" "$SRV4" "$NETNS_TMP/slow.ready"
wait_file "$NETNS_TMP/slow.ready" 10 || fail "the slow server did not start"
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
  if flow.dst_port == 9300 or flow.dst_port == 9301 then return "good" end
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

check "a slow destination behind a working proxy: said at debug, not counted"
(cli_curl -o "$NETNS_TMP/slow.out" --max-time 10 "http://$SRV4:9300/") &
SLOW=$!
sleep 0.5
assert_eq "ok" "$(cli_curl --max-time 5 "http://$SRV4:9301/")" "a quick answer through 'good' meanwhile"
wait "$SLOW" || fail "the slow request through 'good' failed"
assert_eq "ok" "$(cat "$NETNS_TMP/slow.out")" "the slow answer arrived"
assert_log "debug no byte from proxy 'good' in 5\.0 s after the request, but it answers other flows: a slow destination$" "the slow destination at debug"
assert_log "info  proxy 'good' answered after 6\.[0-9] s: a slow server, not a wrong password$" "the late answer"
assert_no_log "warn  no byte from proxy 'good'" "no warning for 'good'"
stats_read C
assert_eq 1 "$C_proxy_silent" "proxy_silent still counts only hk's flow"
assert_match '"alive": *true' "$(cli_curl --max-time 5 "http://$CTL/proxies/good")" "good is alive"

chute_alive
pass
