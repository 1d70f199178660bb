#!/usr/bin/env bash
# Lua surface, route(): the flow's fields for a name, IPv4
# and IPv6 destinations, UDP and TUN flows; misuse of the flow; what each
# kind of return value decides.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

line() { # line HOST NETWORK DST_IP DST_PORT INBOUND: route-fields' first print
    echo "info  script: network=$2(string) src_ip=127.0.0.1(string) src_port=0(integer) dst_ip=$3 dst_port=$4(integer) host=$1 inbound=$5(string) id=1(integer)"
}

chute route route-fields example.com
expect "a name: host set, dst_ip nil, port 443 by default" 0 "DIRECT${T}route" \
"$(line 'example.com(string)' tcp 'nil(nil)' 443 socks)
info  script: tostring: flow 1 tcp -> example.com:443"

chute route route-fields 192.0.2.1:80
expect "an IPv4 destination: dst_ip set, host nil" 0 "DIRECT${T}route" \
"$(line 'nil(nil)' tcp '192.0.2.1(string)' 80 socks)
info  script: tostring: flow 1 tcp -> 192.0.2.1:80"

chute route --network udp --inbound tun route-fields '[2001:db8::1]:53'
expect "an IPv6 destination over UDP from the TUN" 0 "DIRECT${T}route" \
"$(line 'nil(nil)' udp '2001:db8::1(string)' 53 tun)
info  script: tostring: flow 1 udp -> [2001:db8::1]:53"

chute route --inbound http route-fields 2001:db8::2
expect "a bare IPv6 literal from the HTTP inbound" 0 "DIRECT${T}route" \
"$(line 'nil(nil)' tcp '2001:db8::2(string)' 443 http)
info  script: tostring: flow 1 tcp -> [2001:db8::2]:443"

fields="fields: network, src_ip, src_port, dst_ip, dst_port, host, inbound, id, process_name, process_path, uid"
chute route route-misuse field.test
expect_fallback "an unknown field is an error naming it and the fields" "fallback: error" \
    "warn  flow 1: route() failed: route-misuse/main.lua:7: flow has no field 'dst_host' ($fields); using DIRECT"

chute route route-misuse write.test
expect_fallback "flow fields are read-only" "fallback: error" \
    "warn  flow 1: route() failed: route-misuse/main.lua:9: flow fields are read-only; using DIRECT"

chute route route-misuse protected.test
expect "the same errors caught by pcall; the metatable is hidden" 0 "REJECT${T}route" \
"info  script: unknown field: route-misuse/main.lua:11: flow has no field 'port' ($fields)
info  script: write: route-misuse/main.lua:12: flow fields are read-only
info  script: metatable: false
info  script: host still: protected.test"

# A flow kept past its route() call: spec/unit/script/script_test.c
# test_flow_kept_across_calls (bundles cannot run a finalizer to read it
# after the call any more: sandbox.c refuses __gc).

chute route route-returns direct.test
expect "\"DIRECT\"" 0 "DIRECT${T}route" ""
chute route route-returns reject.test
expect "\"REJECT\"" 0 "REJECT${T}route" ""
chute route route-returns nothing.test
expect "nil: the fallback, without a warning" 0 "DIRECT${T}fallback: route() returned nil" ""
chute route route-returns nope.test
expect_fallback "an unknown name: fallback, warning at route()'s definition" "fallback: unknown policy" \
    "warn  flow 1: route-returns/main.lua:12: route() returned unknown policy 'NOPE'; using DIRECT"
chute route route-returns lower.test
expect_fallback "policy names are case-sensitive" "fallback: unknown policy" \
    "warn  flow 1: route-returns/main.lua:12: route() returned unknown policy 'direct' (policy names are case-sensitive: did you mean DIRECT?); using DIRECT"
chute route route-returns table.test
expect_fallback "a table is not a policy" "fallback: unknown policy" \
    "warn  flow 1: route-returns/main.lua:12: route() returned a table, not a policy name; using DIRECT"
chute route route-returns error.test
expect_fallback "an error: fallback, warning with the error's file:line" "fallback: error" \
    "warn  flow 1: route() failed: route-returns/main.lua:15: no route for error.test; using DIRECT"
chute route route-returns error-table.test
expect_fallback "an error with a table value" "fallback: error" \
    "warn  flow 1: route() failed: route-returns/main.lua:12: (error object is a table value); using DIRECT"

exit $failed
