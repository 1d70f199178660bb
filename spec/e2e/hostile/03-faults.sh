#!/usr/bin/env bash
# Faults (issue 19), on loopback: proxies that hang, answer garbage or die
# mid-transfer, an origin that resets mid-body, DNS upstreams that are
# down or answer garbage. Every flow ends with an error the client
# understands (a SOCKS5 REP code, a 502/504, a cut transfer) within its
# timeout (timeouts.connect = 3 s here: bound 6 s), a fallback group moves
# off a hanging member, nothing is left open afterwards (flows_active 0,
# descriptors and RSS back near the baseline), and other clients are
# served throughout. (Loss, reordering and jitter need namespaces: they
# are 08-bad-link.) ~60 s.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hostile.bash"

need_cmd microsocks
e2e_init
origin_start
read -r HOLE JUNK RESET GOOD KILL DEADDNS JUNKDNS SLOW < <(e2e_ports 8) || fail "e2e_ports: no 8 free ports"
peer() { fault_peer "$@"; }
peer hole "$HOLE"
peer junk "$JUNK"
peer reset "$RESET"
peer dnsjunk "$JUNKDNS"
peer slow "$SLOW"
microsocks -i 127.0.0.1 -p "$GOOD" >"$E2E_TMP/good.log" 2>&1 &
E2E_EXTRA_PIDS+=($!)
microsocks -i 127.0.0.1 -p "$KILL" >"$E2E_TMP/kill.log" 2>&1 &
KILL_PID=$!
E2E_EXTRA_PIDS+=("$KILL_PID")
wait_port 127.0.0.1 "$GOOD" 5 && wait_port 127.0.0.1 "$KILL" 5 || fail "microsocks did not start"

bundle_write "  timeouts = { connect = 3, idle = 30 },
  dns = { upstream = { \"127.0.0.1:$DEADDNS\", \"127.0.0.1:$JUNKDNS\" }, timeout = 1 }," <<LUA
chute.proxy "hole" { type = "socks5", server = "127.0.0.1", port = $HOLE }
chute.proxy "hhole" { type = "http", server = "127.0.0.1", port = $HOLE }
chute.proxy "junk" { type = "socks5", server = "127.0.0.1", port = $JUNK }
chute.proxy "hjunk" { type = "http", server = "127.0.0.1", port = $JUNK }
chute.proxy "good" { type = "socks5", server = "127.0.0.1", port = $GOOD }
chute.proxy "dies" { type = "socks5", server = "127.0.0.1", port = $KILL }
chute.group "fb" { type = "fallback", proxies = { "hole", "good" },
                   url = "http://127.0.0.1:$ORIGIN_PORT/small", interval = 1, timeout = 1 }
local by_host = { ["hole.test"] = "hole", ["hhole.test"] = "hhole", ["junk.test"] = "junk",
                  ["hjunk.test"] = "hjunk", ["fb.test"] = "fb" }
function chute.route(flow)
  if by_host[flow.host or ""] then return by_host[flow.host] end
  if flow.dst_port == $SLOW then return "dies" end
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

# within SECS CMD...: CMD's output; fails if it took longer than SECS.
within() {
    local secs=$1 start out
    shift
    start=$(now)
    out=$("$@" 2>/dev/null || true)
    lt "$(elapsed "$start")" "$secs" || fail "$* took $(elapsed "$start") s (bound $secs s)"
    echo "$out"
}
rep_of() { flood socks 127.0.0.1 "$SOCKS_PORT" "$1" "$2" --secs 20 | cut -d' ' -f1; }

say "a proxy that accepts and never answers (SOCKS5 and HTTP CONNECT)"
r=$(within 6 rep_of hole.test 80)
check "SOCKS5 client through a hanging SOCKS5 proxy: REP $r (a failure code, not success, within 6 s)"
[[ "$r" =~ ^[1-8]$ ]] || fail "hanging proxy: the client got '$r', expected a SOCKS5 REP failure code"
r=$(within 6 http_status -x "$HTTPX" http://hhole.test/)
assert_match '^50[24]$' "$r" "HTTP proxy client through a hanging HTTP proxy: 502/504 ($r) within 6 s"
probe "meanwhile"

say "a proxy that answers garbage"
r=$(within 6 rep_of junk.test 80)
check "SOCKS5 through a garbage SOCKS5 proxy: REP $r"
[[ "$r" =~ ^[1-8]$ ]] || fail "garbage proxy: the client got '$r', expected a SOCKS5 REP failure code"
r=$(within 6 http_status -x "$HTTPX" http://hjunk.test/)
assert_match '^50[24]$' "$r" "HTTP through a garbage HTTP proxy: $r"

say "a fallback group whose first member hangs"
wait_log 'groups fb=fallback:good' 8 || { kill -USR1 "$CHUTE_PID"; sleep 0.3; }
for i in 1 2 3; do
    got=$(within 8 fetch_sha -x "$SOCKS" "http://fb.test:$ORIGIN_PORT/small" --connect-to "fb.test:$ORIGIN_PORT:localhost:$ORIGIN_PORT")
    [ "$got" = "$SHA_SMALL" ] || true
done
kill -USR1 "$CHUTE_PID"
assert_log 'groups fb=fallback:good hole=down' "fb moved to good, hole marked down" 5

say "the proxy dies mid-transfer"
rc=0
( rc=0; curl --silent --max-time 20 -x "$SOCKS" -o "$E2E_TMP/cut.bin" \
      "http://127.0.0.1:$SLOW/" || rc=$?; echo "$rc" >"$E2E_TMP/cut.rc" ) &
dl=$!
sleep 1.5
kill -KILL "$KILL_PID"
wait "$KILL_PID" 2>/dev/null || true
start=$(now)
wait "$dl" || true
rc=$(cat "$E2E_TMP/cut.rc")
check "the download ends at once with a cut transfer (curl $rc in $(elapsed "$start") s, bound 3 s)"
lt "$(elapsed "$start")" 3 || fail "the client hung after its proxy died"
[ "$rc" != 0 ] || fail "a download cut by a dead proxy looked whole"
size=$(stat -c %s "$E2E_TMP/cut.bin")
[ "$size" -lt 10000000 ] || fail "got the whole body ($size) from a dead proxy"

say "an origin that resets mid-body"
for via in "$SOCKS" "$HTTPX"; do
    start=$(now)
    rc=$(curl_rc -x "$via" "http://localhost:$RESET/")
    check "through $via: curl ends with an error ($rc) in $(elapsed "$start") s (bound 3 s)"
    [ "$rc" != 0 ] && lt "$(elapsed "$start")" 3 || fail "reset origin through $via: curl $rc"
done

say "DNS upstreams: one down, one answering garbage"
r=$(within 8 rep_of nosuch.test "$ORIGIN_PORT")
check "SOCKS5 to a name no upstream answers: REP $r (4 host unreachable or 1, within 8 s)"
[[ "$r" =~ ^[14]$ ]] || fail "unresolvable name: the client got '$r'"
r=$(within 8 http_status -x "$HTTPX" "http://nosuch.test:$ORIGIN_PORT/")
assert_match '^50[24]$' "$r" "HTTP proxy to that name: $r"
read -r fails < <(stat_of resolver_failures)
assert_ge 1 "$fails" "resolver_failures counts it ($fails)"

probe "after"
sleep 1
read -r active < <(stat_of flows_active)
assert_eq 0 "$active" "no flow left open (flows_active)"
assert_no_leak 8 10
chute_stop_within 5
e2e_pass
