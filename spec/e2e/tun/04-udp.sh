#!/usr/bin/env bash
# UDP through the TUN (NAT, no lwIP): 100 datagrams of different sizes to
# the echo server over v4 and over v6 all come back exact; a DNS query
# with dig gets dnsmasq's answer; the counters and the flow lines agree.
. "$(dirname "$0")/../netns.sh"
need_root
need_cmd dig
tun_env_up udp dns

echo_run() { # HOST: sends 100 datagrams one by one, checks each echo
    cli_py "$1" "$ECHO_PORT" <<'PY'
import random, socket, sys
host, port = sys.argv[1], int(sys.argv[2])
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
top = 1472 if fam == socket.AF_INET else 1452   # the largest that fits MTU 1500
rng = random.Random(2022)
sizes = [1, 2, 100, 512, 1000, 1400, top] + rng.sample(range(3, top), 93)
s = socket.socket(fam, socket.SOCK_DGRAM)
s.connect((host, port))
s.settimeout(2)
ok = total = 0
for i, n in enumerate(sizes):
    data = bytes(rng.getrandbits(8) for _ in range(n))
    s.send(data)
    total += n
    try:
        got = s.recv(65535)
    except socket.timeout:
        print(f"datagram {i} ({n} bytes): no echo in 2 s")
        continue
    if got == data:
        ok += 1
    else:
        print(f"datagram {i} ({n} bytes): echo differs ({len(got)} bytes back)")
print(f"sent={len(sizes)} ok={ok} bytes={total} has1400={1400 in sizes}")
PY
}

for host in "$SRV4" "$SRV6"; do
    check "100 UDP datagrams (1..1472 bytes, 1400 among them) to $host:$ECHO_PORT echo exactly"
    out=$(echo_run "$host") || fail "the UDP client failed: $out"
    res=$(tail -n 1 <<<"$out")
    bytes=$(sed -n 's/.* bytes=\([0-9]*\) .*/\1/p' <<<"$res")
    assert_eq "sent=100 ok=100 bytes=$bytes has1400=True" "$res" "all 100 echoed exactly via $host"
    eval "BYTES_${host//[.:]/_}=$bytes"
done

check "dig @$SRV4 test.example through the TUN gets $SRV4"
ans=$(cli dig "@$SRV4" test.example A +short "${DIG_WAIT[@]}" 2>&1) || fail "dig failed: $ans"
assert_eq "$SRV4" "$ans" "dnsmasq's answer for test.example"
nx=$(cli dig "@$SRV4" nothing.invalid A "${DIG_WAIT[@]}" 2>&1) || fail "dig failed: $nx"
assert_match "status: REFUSED|status: NXDOMAIN|status: SERVFAIL" "$nx" "a name outside the test zone gets an answer too (no relay timeout)"

stats_read
say "stats: udp_total=$S_udp_total udp_active=$S_udp_active udp_dropped=$S_udp_dropped flows_total=$S_flows_total route_calls=$S_route_calls"
# echo v4, echo v6, and one per dig run (each has its own source port)
assert_eq 4 "$S_udp_total" "udp_total: one NAT entry per 5-tuple"
assert_eq 4 "$S_udp_active" "udp_active: the entries live until the udp timeout"
assert_eq 0 "$S_udp_dropped" "udp_dropped"
assert_eq 0 "$S_tcp_total" "no TCP went through"
assert_decided_once

# At exit the UDP flows close and are logged with their byte counts.
chute_stop_within 5
for host in "$SRV4" "$SRV6"; do
    b=BYTES_${host//[.:]/_}
    re="flow [0-9]+ udp tun .* -> \[?$host\]?:$ECHO_PORT policy=DIRECT $RULE_RE up=${!b} down=${!b} "
    assert_eq 1 "$(flow_lines "$re" | wc -l)" "the $host echo flow line has up=down=${!b}"
done
assert_eq 2 "$(flow_lines "udp tun 198\.19\.0\.1:[0-9]+ -> $SRV4:$DNS_PORT policy=DIRECT $RULE_RE up=[1-9][0-9]* down=[1-9][0-9]* " | wc -l)" "two DNS flow lines, bytes both ways"
pass
