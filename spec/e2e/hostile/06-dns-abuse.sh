#!/usr/bin/env bash
# DNS abuse (issue 19), on loopback against chute's DNS listener (fake-IP,
# a 1024-name pool): 20,000 random datagrams, malformed queries
# (compression loops, pointers past the end, huge counts), 20,000 random
# names (the pool recycles), and over TCP huge length prefixes and
# trickling writers from one source (32 per source, 256 in all). Every
# answer fits 512 bytes (no EDNS), other clients are answered throughout,
# fake entries stay at the pool's size, and afterwards RSS is within 8 MiB
# and descriptors within 10 of the baseline. ~40 s.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hostile.bash"

need_cmd dig
e2e_init
origin_start
read -r DNS_PORT UP < <(e2e_ports 2) || fail "e2e_ports: no free ports"
python3 "$HOSTILE_DIR/faultpeer.py" dnsself 127.0.0.1 "$UP" "$E2E_TMP/up.ready" >"$E2E_TMP/up.log" 2>&1 &
E2E_EXTRA_PIDS+=($!)
bundle_write "  dns = { listen = \"127.0.0.1:$DNS_PORT\", upstream = { \"127.0.0.1:$UP\" },
          persist = false, fake_ip_size = 1024, timeout = 1 }," <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
chute_start
wait_port 127.0.0.1 "$DNS_PORT" 10 || fail "chute's DNS listener does not accept TCP"
answered() { # answered WHEN: a normal query gets a fake IP over UDP and TCP
    local a
    a=$(dig @127.0.0.1 -p "$DNS_PORT" probe.example A +short "${DIG_WAIT[@]}" 2>&1 || true)
    assert_match '^198\.1[89]\.' "$a" "$1: a UDP query is answered ($a)"
    a=$(dig @127.0.0.1 -p "$DNS_PORT" probe.example A +short +tcp "${DIG_WAIT[@]}" 2>&1 || true)
    assert_match '^198\.1[89]\.' "$a" "$1: a TCP query is answered ($a)"
}
answered "before"
baseline

abuse() { python3 - "$DNS_PORT" "$1" <<'PY'; }
import os, random, socket, struct, sys, time
port, what = int(sys.argv[1]), sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.5)
biggest = answers = 0

def drain():
    global biggest, answers
    s.setblocking(False)
    while True:
        try:
            a = s.recv(65536)
        except BlockingIOError:
            break
        answers += 1
        biggest = max(biggest, len(a))
    s.setblocking(True)

def q(name, qtype=1, qid=None):
    qid = random.randrange(65536) if qid is None else qid
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + b"".join(
        bytes([len(l)]) + l for l in name.encode().split(b".")) + b"\0" + struct.pack("!HH", qtype, 1)

if what == "random":
    for i in range(20000):
        s.sendto(os.urandom(random.randint(0, 600)), ("127.0.0.1", port))
        if i % 200 == 0:
            drain()
elif what == "malformed":
    hdr = lambda qd, an=0: struct.pack("!HHHHHH", random.randrange(65536), 0x0100, qd, an, 0, 0)
    shapes = [
        hdr(1) + b"\xc0\x0c" + b"\x00\x01\x00\x01",               # a name pointing at itself
        hdr(1) + b"\x01a\xc0\x0c" + b"\x00\x01\x00\x01",          # a loop through a label
        hdr(1) + b"\xc0\xff",                                      # a pointer past the end
        hdr(65535) + q("x.example")[12:],                          # 65535 questions promised
        hdr(1, 65535) + q("x.example")[12:],                       # answers in a query
        hdr(1) + b"\x3f" + b"a" * 63 + b"\x3f" + b"b" * 63 + b"\x3f" + b"c" * 63 + b"\x3f" + b"d" * 63 + b"\0\0\1\0\1",
        hdr(1) + b"\x40" + b"a" * 64 + b"\0\0\1\0\1",              # a 64-byte label
        hdr(1) + b"\x05ab",                                         # cut in a label
        hdr(0),
        q("x.example", qtype=255), q("x.example", qtype=252), q("", qtype=1),
    ]
    for i in range(5000):
        s.sendto(shapes[i % len(shapes)], ("127.0.0.1", port))
        if i % 100 == 0:
            drain()
elif what == "names":
    for i in range(20000):
        s.sendto(q("r%x.soak%d.example" % (random.randrange(1 << 40), i)), ("127.0.0.1", port))
        if i % 100 == 0:
            time.sleep(0.01)
            drain()
time.sleep(0.5)
drain()
print("%d answers, the biggest %d bytes" % (answers, biggest))
sys.exit(1 if biggest > 512 else 0)
PY

for what in random malformed names; do
    say "UDP: $what"
    out=$(abuse "$what") || fail "$what: an answer over 512 bytes: $out"
    check "$what: $out (every answer fits 512 bytes)"
    answered "after $what"
done
read -r fake < <(stat_of dns_fake_entries)
check "fake entries stay at the pool's size: $fake (bound 1024)"
[ "$fake" -le 1024 ] || fail "the fake-IP pool grew past its size: $fake"

say "TCP: 200 connections from one source with a 65535-byte length prefix, trickling"
flood hold 127.0.0.1 "$DNS_PORT" 200 --send ffff --trickle "$(printf 'ab%.0s' $(seq 20))" --interval 0.5 \
    --secs 12 >"$E2E_TMP/tcp.json" &
fl=$!
sleep 2
# From another source: its own share of the 256 slots
a=$(dig @127.0.0.1 -p "$DNS_PORT" -b 127.0.0.9 probe.example A +short +tcp "${DIG_WAIT[@]}" 2>&1 || true)
assert_match '^198\.1[89]\.' "$a" "during: a TCP query from another source is answered ($a)"
answered "during the TCP flood"
wait "$fl"
python3 - "$E2E_TMP/tcp.json" <<'PY' || fail "TCP: trickling connections were held past the bound"
import json, sys
j = json.load(open(sys.argv[1]))
t = j["closed_at"]
held = [x for x in t if x is None]
print("TCP: %d opened, %d closed by chute, %d held to the end" % (j["opened"], len(t) - len(held), len(held)))
sys.exit(0 if len(held) <= 32 else 1)
PY
check "TCP: at most 32 of one source's trickling connections are held"

answered "after"
sleep 1
assert_no_leak 8 10
chute_stop_within 5
e2e_pass
