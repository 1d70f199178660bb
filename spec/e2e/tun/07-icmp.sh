#!/usr/bin/env bash
# ICMP echo through the TUN is answered by chute itself (the server
# namespace never sees it): 3 echo requests to $SRV4 and 3 to $SRV6 from
# python3 raw sockets (id, sequence and payload checked), and the same
# with ping when iputils-ping is installed (with CI=true it must be);
# icmp_echo counts each one.
. "$(dirname "$0")/../netns.sh"
need_root
tun_env_up http

raw_ping() { # HOST COUNT -> one line per reply, then "ok=N"
    cli_py "$1" "$2" <<'PY'
import os, socket, struct, sys, time
host, count = sys.argv[1], int(sys.argv[2])
v6 = ":" in host
if v6:
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    req_type, rep_type = 128, 129
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    req_type, rep_type = 8, 0
s.settimeout(2)
def csum(b):
    if len(b) % 2:
        b += b"\0"
    t = sum(struct.unpack(f"!{len(b)//2}H", b))
    t = (t >> 16) + (t & 0xffff); t += t >> 16
    return ~t & 0xffff
ident = os.getpid() & 0xffff
ok = 0
for seq in range(1, count + 1):
    data = bytes((seq * 7 + i) & 0xff for i in range(56))
    hdr = struct.pack("!BBHHH", req_type, 0, 0, ident, seq)
    if not v6:  # the kernel fills the ICMPv6 checksum, not the ICMP one
        hdr = struct.pack("!BBHHH", req_type, 0, csum(hdr + data), ident, seq)
    t0 = time.time()
    s.sendto(hdr + data, (host, 0))
    while True:
        try:
            pkt, peer = s.recvfrom(2048)
        except socket.timeout:
            print(f"seq {seq}: no reply"); break
        icmp = pkt if v6 else pkt[(pkt[0] & 15) * 4:]
        t, c, _, i, sq = struct.unpack("!BBHHH", icmp[:8])
        if t != rep_type or i != ident:
            continue  # our own request (v4 raw sockets see it) or another's
        good = sq == seq and icmp[8:] == data and peer[0] == host
        if good and not v6:
            good = csum(icmp) == 0
        print(f"seq {sq}: reply from {peer[0]} in {1000 * (time.time() - t0):.2f} ms {'ok' if good else 'BAD'}")
        ok += good
        break
print(f"ok={ok}")
PY
}

echo_expected=0
for host in "$SRV4" "$SRV6"; do
    check "3 ICMP echo requests to $host (raw socket) all answered exactly"
    out=$(raw_ping "$host" 3) || fail "raw ping $host: $out"
    say "$(head -n 3 <<<"$out" | tr '\n' ';')"
    assert_eq "ok=3" "$(tail -n 1 <<<"$out")" "echo replies from $host"
    echo_expected=$((echo_expected + 3))
done

if have_cmd ping; then
    for host in "$SRV4" "$SRV6"; do
        check "ping -c 3 $host through the TUN"
        out=$(cli ping -c 3 -i 0.2 -W 2 "$host" 2>&1) || fail "ping $host: $out"
        assert_match "3 packets transmitted, 3 received" "$out" "ping $host: 3 of 3"
        echo_expected=$((echo_expected + 3))
    done
else
    say "skipping the ping check"
fi

check "the echoes were answered by chute, not by the server namespace"
stats_read
assert_eq "$echo_expected" "$S_icmp_echo" "icmp_echo counts every request"
# The server namespace's own counters: not one echo request reached it.
in4=$(srv awk '/^Icmp: / { if (!h) { for (i = 1; i <= NF; i++) if ($i == "InEchos") c = i; h = 1 } else print $c }' /proc/net/snmp)
in6=$(srv awk '$1 == "Icmp6InEchos" { print $2 }' /proc/net/snmp6)
assert_eq "0 0" "$in4 $in6" "echo requests counted by the server namespace (v4 v6)"
assert_eq 0 "$S_flows_total" "no flows"
chute_alive
pass
