#!/usr/bin/env bash
# A reload runs main.lua off the loop (issue 19): a main.lua that computes
# for a second or more does not stall the flows meanwhile; SIGHUPs that
# come while it loads are folded into one more load; the last bundle wins.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start
bundle_write <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
chute_start
SOCKS="socks5h://127.0.0.1:$SOCKS_PORT"

say "a main.lua that computes ~150 M instructions before it defines route()"
bundle_write <<'LUA'
local n = 0
for i = 1, 5e7 do n = n + i end
function chute.route(flow)
  return n > 0 and "REJECT" or "DIRECT"
end
LUA
start=$(now)
kill -HUP "$CHUTE_PID"
sleep 0.1
kill -HUP "$CHUTE_PID" # while loading: one more load after this one
worst=0
for i in $(seq 1 10); do
    t0=$(now)
    rc=$(curl_rc -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")
    took=$(elapsed "$t0")
    lt "$worst" "$took" && worst=$took
    [ "$(log_count ' reloaded ')" -ge 1 ] && break
done
check "flows during the load: the slowest took ${worst}s"
lt "$worst" 0.5 || fail "a flow waited ${worst}s during the reload (main.lua ran on the loop)"
wait_log_count ' reloaded ' 2 >/dev/null
assert_eq 2 "$(log_count ' reloaded ')" "the SIGHUP during the load gave one more load"
assert_eq 97 "$(curl_rc -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")" "the new bundle applies (REJECT)"

say "a reload that moves the HTTP listener: said, not silently ignored"
HTTP_PORT_WAS=$HTTP_PORT
HTTP_PORT=$((HTTP_PORT + 1))
bundle_write <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
kill -HUP "$CHUTE_PID"
assert_log "warn  reload: listen.http changed \(127.0.0.1:$HTTP_PORT_WAS -> 127.0.0.1:$HTTP_PORT\); restart chute to apply it" \
    "the reload says the listener change needs a restart"
HTTP_PORT=$HTTP_PORT_WAS
chute_stop_within 2
e2e_pass
