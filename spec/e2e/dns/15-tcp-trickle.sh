#!/usr/bin/env bash
# DNS over TCP against trickling clients (issue 19): 300 connections that
# send a length prefix a byte at a time and never a whole query. They
# cannot lock other clients out: a full table evicts the idlest, one
# source holds at most its share, and a connection lives only TCP_IDLE
# (10 s) past its last whole query however it trickles.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/dnslib.bash"

dns_init
upstream_start
dns_bundle 'persist = false' <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
dns_chute_start

python3 - "$DNS_PORT" <<'PY' &
import socket, sys, time
held = []
for _ in range(300):
    try:
        held.append(socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2))
    except OSError:
        pass
end = time.time() + 14
while time.time() < end:  # a byte a second each: every idle timer would restart
    for c in held:
        try:
            c.send(b"\xff")
        except OSError:
            pass
    time.sleep(1)
PY
trickle=$!
sleep 3
assert_in_net "$(dq during1.test.example A +tcp +tries=1 +time=3)" 198.18.0.0/15 \
    "while 300 connections trickle, a TCP query is answered"
assert_in_net "$(dq during2.test.example A +tcp +tries=1 +time=3)" 198.18.0.0/15 "and another"
left=$(ss -Htn state established "( sport = :$DNS_PORT )" | wc -l)
check "chute holds $left DNS TCP connections (at most 32 from one source)"
[ "$left" -le 33 ] || fail "one source holds $left DNS TCP connections"
sleep 9
left=$(ss -Htn state established "( sport = :$DNS_PORT )" | wc -l)
check "12 s in, with no whole query, the trickling connections are gone ($left left)"
[ "$left" -eq 0 ] || fail "$left trickling connections still open after TCP_IDLE"
kill "$trickle" 2>/dev/null || true
wait "$trickle" 2>/dev/null || true
chute_stop_within 2
e2e_pass
