#!/usr/bin/env bash
# chute.on_dns on the loopback listener: false / "nxdomain" block
# (NXDOMAIN for every type, with an SOA for negative caching), an address
# or a list maps (A and AAAA each from its family), "real" gets dnsmasq's
# answer in fake-ip mode, nil the usual fake IP; a hook that errors or
# returns nonsense is logged with file:line and the name is answered as
# usual. The hook runs once per name whatever the types and repeats, and
# a reload (SIGHUP) forgets its decisions.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/dnslib.bash"

dns_init
upstream_start --local-ttl=30
dns_bundle 'persist = false' <<'LUA'
function chute.route(flow) return "DIRECT" end
local calls = 0
function chute.on_dns(q)
  calls = calls + 1
  chute.log("info", "on_dns call " .. calls .. " " .. q.name .. " " .. q.type)
  local n = q.name
  if n == "blocked.test.example" or n:sub(-17) == ".ads.test.example" then return false end
  if n == "nx.test.example" then return "nxdomain" end
  if n == "mapped.test.example" then return { "192.0.2.7", "192.0.2.8", "2001:db8::7" } end
  if n == "one.test.example" then return "192.0.2.9" end
  if n == "real.test.example" then return "real" end
  if n == "boom.test.example" then error("boom") end
  if n == "odd.test.example" then return 42 end
  if n == "loop.test.example" then while true do end end
  return nil
end
LUA
dns_chute_start

say "block"
for t in A AAAA TXT; do
    full=$(dfull blocked.test.example $t)
    assert_eq NXDOMAIN "$(dstatus "$full")" "on_dns false: $t blocked.test.example is NXDOMAIN"
done
assert_match "IN[[:space:]]+SOA" "$full" "the NXDOMAIN carries an SOA (negative caching)"
assert_eq NXDOMAIN "$(dstatus "$(dfull x.ads.test.example A)")" "a suffix block: x.ads.test.example"
assert_eq NXDOMAIN "$(dstatus "$(dfull nx.test.example A)")" "on_dns \"nxdomain\": NXDOMAIN"

say "map"
assert_eq "$(printf '192.0.2.7\n192.0.2.8')" "$(dq mapped.test.example A)" "a list: both IPv4 addresses for A"
assert_eq "2001:db8::7" "$(dq mapped.test.example AAAA)" "a list: the IPv6 address for AAAA"
assert_eq 192.0.2.9 "$(dq one.test.example A)" "one address string"
full=$(dfull one.test.example AAAA)
assert_eq NOERROR "$(dstatus "$full")" "AAAA of a v4-only mapping: NOERROR"
assert_match "ANSWER: 0," "$full" "AAAA of a v4-only mapping: no records"

say "real, nil, errors"
assert_eq 10.1.2.3 "$(dq real.test.example A)" "on_dns \"real\": dnsmasq's address in fake-ip mode"
f=$(dq plain.test.example A)
assert_in_net "$f" 198.18.0.0/15 "on_dns nil: the usual fake IP ($f)"
f=$(dq boom.test.example A)
assert_in_net "$f" 198.18.0.0/15 "a hook that errors: the name is answered as usual ($f)"
assert_log 'dns boom\.test\.example: on_dns failed: .*main\.lua:[0-9]+: boom' "the error is logged with file:line"
f=$(dq odd.test.example A)
assert_in_net "$f" 198.18.0.0/15 "a hook that returns a number: answered as usual ($f)"
assert_log "dns odd\\.test\\.example: .*main\\.lua:[0-9]+: on_dns returned a number" "the bad return is logged with file:line"
f=$(dq loop.test.example A)
assert_in_net "$f" 198.18.0.0/15 "a hook that never returns is stopped by the budget: answered as usual ($f)"
assert_log "dns loop\\.test\\.example: on_dns failed: .*instruction budget exceeded" "the overrun is logged"

say "once per name"
for n in blocked.test.example mapped.test.example real.test.example plain.test.example; do
    for t in A AAAA A MX; do dq "$n" "$t" >/dev/null; done
done
for n in blocked.test.example x.ads.test.example nx.test.example mapped.test.example \
    one.test.example real.test.example plain.test.example boom.test.example odd.test.example \
    loop.test.example; do
    assert_eq 1 "$(log_count "on_dns call [0-9]+ ${n//./\\.} ")" "on_dns ran once for $n"
done
for t in A AAAA; do dq loop.test.example $t >/dev/null; done
assert_eq 10 "$(log_count 'on_dns call [0-9]+ ')" "ten names, ten calls"

check "blocked and mapped names never reach the upstream"
for n in blocked.test.example x.ads.test.example nx.test.example mapped.test.example one.test.example; do
    assert_eq 0 "$(up_queries $n)" "no upstream query for $n"
done
assert_ge 1 "$(up_queries real.test.example A)" "real.test.example was asked upstream"
dstats
say "stats: dns_blocked=$S_dns_blocked dns_hook=$S_dns_hook dns_fake=$S_dns_fake dns_forwarded=$S_dns_forwarded"
# blocked: 3 + x.ads + nx + 4 repeats of blocked = 9
assert_eq 9 "$S_dns_blocked" "dns_blocked counts every blocked query"
# mapped A, AAAA, one A, AAAA + 4 repeats of mapped = 8
assert_eq 8 "$S_dns_hook" "dns_hook counts every mapped query"

say "a reload forgets the decisions"
dns_bundle 'persist = false' <<'LUA'
function chute.route(flow) return "DIRECT" end
function chute.on_dns(q)
  chute.log("info", "on_dns v2 " .. q.name)
  if q.name == "blocked.test.example" then return "192.0.2.99" end
end
LUA
kill -HUP "$CHUTE_PID"
assert_log "reloaded .*rule version 2" "SIGHUP: reloaded"
assert_eq 192.0.2.99 "$(dq blocked.test.example A)" "the new on_dns decides blocked.test.example"
assert_eq 192.0.2.99 "$(dq blocked.test.example A)" "again"
assert_eq 1 "$(log_count 'on_dns v2 blocked\.test\.example')" "the new hook ran once for it"
f=$(dq mapped.test.example A)
assert_in_net "$f" 198.18.0.0/15 "mapped.test.example: the new hook returns nil, a fake IP ($f)"
e2e_pass
