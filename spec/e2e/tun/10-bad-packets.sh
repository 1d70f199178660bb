#!/usr/bin/env bash
# Garbage into the TUN path. From the client namespace, packets are written
# onto the TUN device with an AF_PACKET socket (any bytes at all: truncated
# IPv4/IPv6, wrong versions, contradicting lengths, fragments, protocols
# chute does not handle, broken TCP/UDP headers, random bytes), plus a
# fragment sent the ordinary way (a raw IP socket with IP_HDRINCL, routed
# into the TUN by auto_route). chute must count each in its drop reason,
# answer stray TCP segments without a flow, and go on serving.
. "$(dirname "$0")/../netns.sh"
need_root
tun_env_up http

stats_read B
check "inject malformed packets into $TUN_DEV"
out=$(cli_py "$TUN_DEV" "$CLI4" "$SRV4" <<'PY'
import random, socket, struct, sys
dev, src4, dst4 = sys.argv[1], socket.inet_aton(sys.argv[2]), socket.inet_aton(sys.argv[3])
src6, dst6 = socket.inet_pton(socket.AF_INET6, "fdfe::1"), socket.inet_pton(socket.AF_INET6, "fd20::2")
rng = random.Random(7)
ETH_P_IP, ETH_P_IPV6 = 0x0800, 0x86DD

def v4(proto=6, payload=b"", total=None, ihl=5, frag=0, ver=4):
    opts = b"\0" * max(0, ihl * 4 - 20)
    tl = total if total is not None else 20 + len(opts) + len(payload)
    return struct.pack("!BBHHHBBH4s4s", ver << 4 | ihl, 0, tl & 0xffff, 1, frag, 64, proto, 0, src4, dst4) + opts + payload

def v6(nh=6, payload=b"", plen=None):
    pl = plen if plen is not None else len(payload)
    return struct.pack("!IHBB16s16s", 6 << 28, pl & 0xffff, nh, 64, src6, dst6) + payload

def tcp(off=5, flags=0x10, extra=b""):
    return struct.pack("!HHIIBBHHH", 40000, 80, 1, 1, off << 4, flags, 1024, 0, 0) + extra

def udp(length=None, data=b"xx"):
    return struct.pack("!HHHH", 40000, 7, length if length is not None else 8 + len(data), 0) + data

want = {"truncated": [], "version": [], "length": [], "fragment": [], "proto": [], "l4": []}
# truncated: shorter than the header, or than the total length it claims
want["truncated"] += [bytes([0x45]), v4()[:19], v4(payload=tcp(), total=200), v6()[:39],
                      v6(payload=udp(), plen=500), bytes([0x60]) + b"\0" * 10]
for _ in range(20):  # random v4 headers whose total length runs past the buffer
    p = bytearray(rng.randbytes(rng.randint(20, 200)))
    p[0] = 0x45
    struct.pack_into("!H", p, 2, rng.randint(len(p) + 1, 65535))
    want["truncated"].append(bytes(p))
# wrong version: fixed cases plus random bytes whose first nibble is not 4 or 6
want["version"] += [v4(ver=5), v4(ver=0), v4(ver=15), v4(payload=tcp(), ver=7)]
for _ in range(200):
    p = bytearray(rng.randbytes(rng.randint(1, 1500)))
    p[0] = (rng.choice([0, 1, 2, 3, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15]) << 4) | (p[0] & 15)
    want["version"].append(bytes(p))
# lengths that contradict each other: IHL < 5, total < IHL, a v6 extension
# header running past the payload
want["length"] += [v4(ihl=3, payload=b"\0" * 20), v4(ihl=4, payload=b"\0" * 20), v4(payload=tcp(), total=10),
                   v4(ihl=15, payload=tcp(), total=40),
                   v6(nh=0, payload=bytes([6, 4]) + b"\0" * 6), v6(nh=60, payload=b"\x06")]
# fragments: v4 MF, v4 offset, v6 fragment header (after hop-by-hop too)
want["fragment"] += [v4(payload=tcp(), frag=0x2000), v4(payload=udp(), frag=0x0010), v4(payload=b"x" * 8, frag=0x1fff),
                     v6(nh=44, payload=struct.pack("!BBHI", 6, 0, 1, 7) + tcp()),
                     v6(nh=0, payload=bytes([44, 0]) + b"\0" * 6 + struct.pack("!BBHI", 17, 0, 0x0009, 7) + udp())]
# protocols chute does not handle: GRE, SCTP, ICMPv6 in v4, ICMP in v6, no-next-header
want["proto"] += [v4(proto=47, payload=b"\0" * 8), v4(proto=132, payload=b"\0" * 12), v4(proto=58, payload=b"\x80\0\0\0\0\0\0\0"),
                  v6(nh=1, payload=b"\x08\0\0\0\0\0\0\0"), v6(nh=59)]
# broken L4 headers: TCP shorter than 20 bytes or data offset < 5 or past
# the end, UDP length < 8 or past the end, ICMP echo shorter than 8
want["l4"] += [v4(payload=tcp()[:12]), v4(payload=tcp(off=2)), v4(payload=tcp(off=15)),
               v4(proto=17, payload=udp(length=4)), v4(proto=17, payload=udp(length=300)), v4(proto=17, payload=b"\0" * 6),
               v4(proto=1, payload=b"\x08\0\0\0\0\0"), v6(payload=tcp(off=3)), v6(nh=17, payload=udp(length=7)),
               v6(nh=58, payload=b"\x80\0")]

s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM)
sent = {}
for reason, pkts in want.items():
    sent[reason] = 0
    for p in pkts:
        proto = ETH_P_IPV6 if p and p[0] >> 4 == 6 else ETH_P_IP
        s.sendto(p, (dev, proto))
        sent[reason] += 1
# Stray TCP segments (valid headers, no flow): the fast path hands them to lwIP; not drops.
stray = [v4(payload=tcp(flags=0x10)), v4(payload=tcp(flags=0x18, extra=b"data")), v6(payload=tcp(flags=0x11))]
for p in stray:
    s.sendto(p, (dev, ETH_P_IPV6 if p[0] >> 4 == 6 else ETH_P_IP))
# The ordinary way in: a raw IP socket; auto_route sends it into the TUN.
r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
r.sendto(v4(proto=17, payload=udp(data=b"frag" * 4), frag=0x2000), (sys.argv[3], 0))
sent["fragment"] += 1
print(" ".join(f"{k}={v}" for k, v in sent.items()), f"stray={len(stray)}")
PY
) || fail "the injector failed: $out"
say "sent: $out"
read -r -a kv <<<"$out"
declare -A SENT
total=0
for x in "${kv[@]}"; do
    SENT[${x%%=*}]=${x#*=}
    total=$((total + ${x#*=}))
done

# Wait until chute has read them all.
for i in $(seq 50); do
    stats_read A
    [ "$((A_pkts_in - B_pkts_in))" -ge "$total" ] && break
    sleep 0.1
done
say "stats: pkts_in +$((A_pkts_in - B_pkts_in)), drops $B_drops -> $A_drops (truncated/version/length/fragment/proto/l4)"
assert_ge "$total" "$((A_pkts_in - B_pkts_in))" "chute read every injected packet"
for r in truncated version length fragment proto l4; do
    b=B_drops_$r a=A_drops_$r
    assert_eq "${SENT[$r]}" "$((${!a} - ${!b}))" "drops by reason '$r'"
done
assert_eq "$((total - SENT[stray]))" "$((A_drops_sum - B_drops_sum))" "all malformed packets dropped, nothing else"
assert_eq "$B_flows_total" "$A_flows_total" "no flow was made of them"
assert_eq "$B_route_calls" "$A_route_calls" "route() never ran for them"

check "chute is alive and still serving"
chute_alive
assert_eq "$SHA_1M" "$(cli_fetch_sha "http://$SRV4/1m.bin")" "1m.bin after the garbage"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha -6 "http://[$SRV6]/small")" "small over v6 after the garbage"
stats_read E
assert_eq "$((A_flows_total + 2))" "$E_flows_total" "the two new flows"
assert_decided_once E
chute_alive
pass
