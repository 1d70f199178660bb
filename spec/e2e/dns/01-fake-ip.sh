#!/usr/bin/env bash
# Fake-IP answers on chute's loopback DNS listener (no root): A from the
# pool with TTL = fake_ip_ttl, the same name keeps its address, names are
# case-insensitive, AAAA is empty without fake_ip_range6 and from it with one
# (sharing the A's slot), HTTPS is answered empty, the exclude list gets
# dnsmasq's real answer, and no fake answer costs an upstream query.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/dnslib.bash"

dns_init
upstream_start --local-ttl=30
dns_bundle 'persist = false, fake_ip_ttl = 7,
          exclude = { "+.real.test.example", "exact.test.example" }' <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
dns_chute_start

say "part 1: the default range, no IPv6 range"
full=$(dfull a.test.example A)
assert_eq NOERROR "$(dstatus "$full")" "A a.test.example: NOERROR"
a=$(dq a.test.example A)
assert_in_net "$a" 198.18.0.0/15 "A a.test.example is a fake IP in the default 198.18.0.0/15 ($a)"
assert_eq 1 "$(wc -l <<<"$a")" "exactly one address"
check "not the network nor its gateway address"
case $a in 198.18.0.0 | 198.18.0.1) fail "fake IP $a is reserved" ;; esac
assert_eq 7 "$(dttl "$full")" "TTL of a fake answer = fake_ip_ttl"
assert_eq "$a" "$(dq a.test.example A)" "the same name gets the same address"
assert_eq "$a" "$(dq A.Test.EXAMPLE A)" "letter case does not make a new mapping"
b=$(dq b.test.example A)
assert_in_net "$b" 198.18.0.0/15 "A b.test.example is a fake IP ($b)"
check "two names, two addresses"
[ "$a" != "$b" ] || fail "a.test.example and b.test.example both got $a"
full=$(dfull a.test.example AAAA)
assert_eq NOERROR "$(dstatus "$full")" "AAAA without fake_ip_range6: NOERROR"
assert_eq "" "$(dq a.test.example AAAA)" "AAAA without fake_ip_range6: no address"
full=$(dfull a.test.example HTTPS)
assert_eq NOERROR "$(dstatus "$full")" "HTTPS for a fake name: NOERROR"
assert_match "ANSWER: 0," "$full" "HTTPS for a fake name: no records (no address hints past the fake IP)"

check "the exclude list gets dnsmasq's answers"
t_real=$(now) # real.test.example's answer is cached from here on
assert_eq 10.1.2.3 "$(dq real.test.example A)" "+.real.test.example covers the name itself"
assert_eq 10.1.2.3 "$(dq deep.sub.real.test.example A)" "+.real.test.example covers subdomains"
assert_eq 10.1.2.3 "$(dq exact.test.example A)" "exact.test.example is excluded"
x=$(dq x.exact.test.example A)
assert_in_net "$x" 198.18.0.0/15 "an exact exclude does not cover subdomains: x.exact.test.example is fake ($x)"
ttl=$(dttl "$(dfull real.test.example A)")
lo=$(ttl_floor 30 "$t_real" 25)
check "a real answer keeps dnsmasq's TTL (30, aged in the cache: got $ttl, expected $lo..30)"
[ "${ttl:-0}" -ge "$lo" ] && [ "$ttl" -le 30 ] || fail "TTL of real.test.example: '$ttl', expected $lo..30"

check "the upstream saw only the excluded names"
assert_eq 0 "$(up_queries a.test.example)" "no upstream query for a.test.example"
assert_eq 0 "$(up_queries b.test.example)" "no upstream query for b.test.example"
assert_eq 0 "$(up_queries x.exact.test.example)" "no upstream query for x.exact.test.example"
assert_ge 1 "$(up_queries real.test.example A)" "dnsmasq got real.test.example"
dstats
say "stats: dns_queries=$S_dns_queries dns_fake=$S_dns_fake dns_forwarded=$S_dns_forwarded resolver_sent=$S_resolver_sent dns_fake_entries=$S_dns_fake_entries"
# a x4 (A.Test included), b, AAAA x2, HTTPS, x.exact = 9 fake answers
assert_eq 9 "$S_dns_fake" "dns_fake counts the fake answers"
assert_eq 3 "$S_dns_fake_entries" "three live mappings (a, b, x.exact)"
assert_eq 4 "$S_dns_forwarded" "the four excluded queries were forwarded"
chute_stop_within 5

say "part 2: fake_ip_range = 10.99.0.0/16, fake_ip_range6 = fd99::/64, TTL 3"
dns_bundle 'persist = false, fake_ip_ttl = 3, fake_ip_range = "10.99.0.0/16",
          fake_ip_range6 = "fd99::/64"' <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
dns_chute_start
a4=$(dq a.test.example A)
assert_in_net "$a4" 10.99.0.0/16 "A in fake_ip_range ($a4)"
a6=$(dq a.test.example AAAA)
assert_in_net "$a6" fd99::/64 "AAAA in fake_ip_range6 ($a6)"
assert_eq 3 "$(dttl "$(dfull a.test.example AAAA)")" "TTL of a fake AAAA = fake_ip_ttl"
assert_eq "$a6" "$(dq a.test.example AAAA)" "the same name keeps its AAAA"
c6=$(dq c.test.example AAAA)
c4=$(dq c.test.example A)
assert_in_net "$c6" fd99::/64 "a name asked AAAA first gets a v6 fake ($c6)"
check "A and AAAA of one name share one slot: the same offset in both ranges"
off() { python3 -c 'import ipaddress, sys; print(int(ipaddress.ip_address(sys.argv[1])) - int(ipaddress.ip_network(sys.argv[2]).network_address))' "$1" "$2"; }
[ "$(off "$a4" 10.99.0.0/16)" = "$(off "$a6" fd99::/64)" ] || fail "a.test.example: $a4 and $a6 differ in offset"
[ "$(off "$c4" 10.99.0.0/16)" = "$(off "$c6" fd99::/64)" ] || fail "c.test.example: $c4 and $c6 differ in offset"
[ "$a4" != "$c4" ] || fail "a and c share $a4"
dstats
assert_eq 2 "$S_dns_fake_entries" "two mappings for two names, whatever the families"
assert_eq 0 "$S_resolver_sent" "nothing went upstream"
assert_eq 0 "$(up_queries c.test.example)" "no upstream query for c.test.example"
e2e_pass
