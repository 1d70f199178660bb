#!/usr/bin/env bash
# Proxy loops (issue 19): a proxy whose name resolves to chute's own
# listener (which the load-time check cannot see), and CONNECT / SOCKS5
# requests to chute's own listeners. Each is refused at once (a SOCKS5
# REP failure, 502) instead of coming back in as a new flow that is routed
# out the same way again until descriptors run out: at most 10 flows for
# the whole test, every one closed, descriptors and RSS back near the
# baseline, other clients served. Fails on a tree without the guard
# (outbound_env.is_self). ~20 s.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hostile.bash"

e2e_init
origin_start
DNS=$(e2e_ports 1) || fail "e2e_ports: no free port"
python3 "$HOSTILE_DIR/faultpeer.py" dnsself 127.0.0.1 "$DNS" "$E2E_TMP/dns.ready" >"$E2E_TMP/dns.log" 2>&1 &
E2E_EXTRA_PIDS+=($!)
for _ in $(seq 100); do [ -s "$E2E_TMP/dns.ready" ] && break; sleep 0.05; done
bundle_write "  timeouts = { connect = 3, idle = 30 },
  dns = { upstream = { \"127.0.0.1:$DNS\" }, timeout = 1 }," <<LUA
chute.proxy "self" { type = "socks5", server = "self.test", port = $SOCKS_PORT }
chute.proxy "hself" { type = "http", server = "self.test", port = $HTTP_PORT }
function chute.route(flow)
  if flow.host == "loop.test" then return "self" end
  if flow.host == "hloop.test" then return "hself" end
  return "DIRECT"
end
LUA
chute_start
SOCKS=socks5h://127.0.0.1:$SOCKS_PORT
HTTPX=http://127.0.0.1:$HTTP_PORT
probe() {
    assert_eq 0 "$(curl_rc -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")" "$1: a SOCKS5 client is served"
    assert_eq 0 "$(curl_rc -x "$HTTPX" "http://localhost:$ORIGIN_PORT/small")" "$1: an HTTP proxy client is served"
}
probe "before"
baseline
read -r flows0 < <(stat_of flows_total)

say "a SOCKS5 proxy named self.test, which resolves to chute's own SOCKS5 listener"
start=$(now)
r=$(flood socks 127.0.0.1 "$SOCKS_PORT" loop.test 80 --secs 10 | cut -d' ' -f1)
check "refused with REP $r in $(elapsed "$start") s (a failure code within 3 s)"
[[ "$r" =~ ^[1-8]$ ]] && lt "$(elapsed "$start")" 3 || fail "self-loop through a proxy: '$r' after $(elapsed "$start") s"
say "an HTTP proxy named self.test, at chute's own HTTP listener"
r=$(http_status -x "$HTTPX" http://hloop.test/)
assert_eq 502 "$r" "refused with 502"

say "requests to chute's own listeners"
r=$(flood socks 127.0.0.1 "$SOCKS_PORT" 127.0.0.1 "$SOCKS_PORT" --secs 10 | cut -d' ' -f1)
check "SOCKS5 CONNECT to chute's SOCKS5 listener: REP $r"
[[ "$r" =~ ^[1-8]$ ]] || fail "SOCKS5 to itself: '$r'"
r=$(flood socks 127.0.0.1 "$SOCKS_PORT" localhost "$HTTP_PORT" --secs 10 | cut -d' ' -f1)
check "SOCKS5 CONNECT to chute's HTTP listener by name: REP $r"
[[ "$r" =~ ^[1-8]$ ]] || fail "SOCKS5 to its HTTP listener: '$r'"
r=$(curl --silent --max-time 10 -o /dev/null -w '%{http_connect}' -p -x "$HTTPX" "http://127.0.0.1:$HTTP_PORT/" || true)
assert_eq 502 "$r" "HTTP CONNECT to chute's own HTTP listener: 502"
assert_log "a loop: that is chute's own listener" "the log names the loop"

probe "after"
sleep 0.5
read -r flows1 active < <(stat_of flows_total flows_active | xargs)
check "$((flows1 - flows0)) flows for the whole test (bound 10: nothing recursed)"
[ $((flows1 - flows0)) -le 10 ] || fail "$((flows1 - flows0)) flows: a loop recursed"
assert_eq 0 "$active" "none left open"
assert_no_leak 8 10
chute_stop_within 5
e2e_pass
