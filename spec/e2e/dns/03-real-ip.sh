#!/usr/bin/env bash
# real-ip mode on the loopback listener: dnsmasq's answers are relayed
# (the asker's ID, letter case and EDNS or not kept), repeats come from the cache
# (resolver_sent and dnsmasq's query log unchanged, TTL counting down),
# a 1 s TTL expires and the next query goes upstream again, NXDOMAIN and
# NODATA are cached too, and with the upstream gone cached names still
# resolve while new ones get SERVFAIL instead of silence.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/dnslib.bash"

dns_init
upstream_start --local-ttl=1 --host-record=long.test.example,10.1.2.4,300 \
    --address=/nx.test.example/
UP_PID=${E2E_EXTRA_PIDS[-1]}
dns_bundle 'mode = "real-ip"' <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
dns_chute_start

say "answers from dnsmasq, then from the cache"
t_long=$(now) # long.test.example's answer is cached from here on
full=$(dfull long.test.example A)
assert_eq NOERROR "$(dstatus "$full")" "A long.test.example: NOERROR"
assert_eq 10.1.2.4 "$(dq long.test.example A)" "A long.test.example is dnsmasq's 10.1.2.4"
dstats A
for i in 1 2 3 4 5; do
    got=$(dq long.test.example A)
    [ "$got" = 10.1.2.4 ] || fail "repeat $i: '$got'"
done
dstats B
assert_eq "$A_resolver_sent" "$B_resolver_sent" "five repeats: resolver_sent unchanged ($B_resolver_sent)"
assert_eq $((A_resolver_cache_hits + 5)) "$B_resolver_cache_hits" "five repeats: five cache hits"
assert_eq 1 "$(up_queries long.test.example A)" "dnsmasq was asked for long.test.example once"
sleep 1.2
ttl=$(dttl "$(dfull long.test.example A)")
lo=$(ttl_floor 300 "$t_long" 290)
check "the cached TTL counts down: $ttl < 300 (and >= $lo)"
[ "${ttl:-0}" -ge "$lo" ] && [ "$ttl" -lt 300 ] || fail "TTL '$ttl' after 1.2 s in the cache, expected $lo..299"

check "the asker's letter case comes back in the question (0x20)"
full=$(dfull LoNg.TeSt.ExAmPlE A)
assert_match "^;LoNg\.TeSt\.ExAmPlE\.[[:space:]]+IN[[:space:]]+A" "$full" "the question keeps its case"
assert_match "10\.1\.2\.4" "$full" "and has the answer"

check "EDNS follows the asker (RFC 6891 7): no OPT back for a query without one"
assert_match "ADDITIONAL: 0" "$(dfull long.test.example A +noedns)" "+noedns: no OPT record in the relayed answer"
assert_match "OPT PSEUDOSECTION" "$(dfull long.test.example A)" "with EDNS: an OPT record"

say "TTL expiry"
assert_eq 10.1.2.3 "$(dq short.test.example A)" "A short.test.example (TTL 1)"
n1=$(up_queries short.test.example A)
assert_eq 1 "$n1" "dnsmasq asked once"
sleep 2.2
assert_eq 10.1.2.3 "$(dq short.test.example A)" "A short.test.example again, 2.2 s later"
assert_eq 2 "$(up_queries short.test.example A)" "the expired answer was asked upstream again"

say "negative caching"
for i in 1 2 3; do
    assert_eq NXDOMAIN "$(dstatus "$(dfull nx.test.example A)")" "NXDOMAIN for nx.test.example ($i)"
done
assert_eq 1 "$(up_queries nx.test.example A)" "the NXDOMAIN was asked upstream once, then cached"
for i in 1 2 3; do
    full=$(dfull long.test.example AAAA)
    assert_eq NOERROR "$(dstatus "$full")" "AAAA long.test.example: NOERROR ($i)"
    assert_match "ANSWER: 0," "$full" "AAAA long.test.example: NODATA ($i)"
done
assert_eq 1 "$(up_queries long.test.example AAAA)" "NODATA was asked upstream once, then cached"

say "upstream gone"
kill_wait "$UP_PID" || true # (its wait returns the exit status)
assert_eq 10.1.2.4 "$(dq long.test.example A)" "a cached name still resolves"
start=$(now)
full=$(dig @127.0.0.1 -p "$DNS_PORT" gone.test.example A +time=8 +tries=1 2>&1)
assert_eq SERVFAIL "$(dstatus "$full")" "a new name gets SERVFAIL, not silence"
t=$(elapsed "$start")
check "SERVFAIL within 5 s (a closed port is refused at once; timeout 1 s per attempt): took ${t}s"
lt "$t" 5 || fail "SERVFAIL took ${t}s"
dstats C
assert_ge 1 "$C_dns_servfail" "dns_servfail counted"
e2e_pass
