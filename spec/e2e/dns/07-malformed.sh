#!/usr/bin/env bash
# Malformed queries on the loopback listener, UDP and TCP: each kind gets
# what it should (FORMERR with the asker's ID, NOTIMP, or silence for
# headerless messages and responses), 10,000 random datagrams and a TCP
# connection flood change nothing: chute stays up, answers a normal query
# afterwards, counts dns_formerr, and exits cleanly. A DNS listener that
# cannot bind stops chute at start with a message, in both modes.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/dnslib.bash"

dns_init
upstream_start
dns_bundle 'persist = false' <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
dns_chute_start

check "each malformed kind over UDP gets the right reply (or none)"
out=$(python3 - "$DNS_PORT" <<'PY'
import random, socket, struct, sys
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("127.0.0.1", port))

def hdr(qid=0x1234, flags=0x0100, qd=1, an=0, ns=0, ar=0):
    return struct.pack(">HHHHHH", qid, flags, qd, an, ns, ar)
def name(n):
    return b"".join(bytes([len(l)]) + l for l in (x.encode() for x in n.split("."))) + b"\0"
Q = name("ok.test.example") + struct.pack(">HH", 1, 1)
OPT = b"\0" + struct.pack(">HHIH", 41, 1232, 0, 0)

cases = [  # (what, message, expected: None = no reply, else the rcode)
    ("empty", b"", None),
    ("one byte", b"\x12", None),
    ("11 bytes", hdr()[:11], None),
    ("header only, qdcount=1", hdr(), 1),
    ("qdcount=0", hdr(qd=0), 1),
    ("qdcount=2", hdr(qd=2) + Q + Q, 1),
    ("QR=1 (a response)", hdr(flags=0x8100) + Q, None),
    ("QR=1, garbage", hdr(flags=0x8000) + b"\xff" * 20, None),
    ("pointer to itself", hdr() + b"\xc0\x0c" + struct.pack(">HH", 1, 1), 1),
    ("pointer forward", hdr() + b"\xc0\x20" + struct.pack(">HH", 1, 1) + b"\0" * 20, 1),
    ("pointer into the header", hdr() + b"\xc0\x02" + struct.pack(">HH", 1, 1), 1),
    ("two-pointer loop", hdr() + b"\x01a\xc0\x0e\xc0\x0c" + struct.pack(">HH", 1, 1), 1),
    ("label of 64", hdr() + b"\x40" + b"a" * 64 + b"\0" + struct.pack(">HH", 1, 1), 1),
    ("extended label type", hdr() + b"\x41" + b"a" * 5 + b"\0" + struct.pack(">HH", 1, 1), 1),
    ("name over 255", hdr() + (b"\x3f" + b"a" * 63) * 5 + b"\0" + struct.pack(">HH", 1, 1), 1),
    ("name without end", hdr() + b"\x05abcde\x05abc", 1),
    ("no type/class", hdr() + name("ok.test.example"), 1),
    ("half a type", hdr() + name("ok.test.example") + b"\x00", 1),
    ("arcount=65535, no records", hdr(ar=65535) + Q, 1),
    ("ancount=1, truncated record", hdr(an=1) + Q + b"\xc0\x0c\x00\x01", 1),
    ("rdlength past the end", hdr(an=1) + Q + b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 0, 400) + b"\x01\x02", 1),
    ("OPT in the answer section", hdr(an=1) + Q + OPT, 1),
    ("two OPT records", hdr(ar=2) + Q + OPT + OPT, 1),
    ("OPT not owned by the root", hdr(ar=1) + Q + b"\x01x\0" + OPT[1:], 1),
    ("opcode STATUS", hdr(flags=0x1100) + Q, 4),
    ("opcode 15", hdr(flags=0x7900) + Q, 4),
    ("valid, for reference", hdr() + Q, 0),
    ("valid with EDNS 65535", hdr(ar=1) + Q + b"\0" + struct.pack(">HHIH", 41, 65535, 0, 0), 0),
]
bad = 0
for what, msg, want in cases:
    s.settimeout(0.5)
    try:
        s.send(msg)
    except OSError as e:
        print(f"{what}: send failed: {e}"); bad += 1; continue
    try:
        r = s.recv(65535)
    except socket.timeout:
        r = None
    if want is None:
        if r is not None:
            print(f"{what}: expected no reply, got {len(r)} bytes rcode {r[3] & 15 if len(r) > 3 else '?'}"); bad += 1
        continue
    if r is None:
        print(f"{what}: expected rcode {want}, got no reply"); bad += 1; continue
    if len(r) < 12 or r[:2] != msg[:2] or not (r[2] & 0x80) or (r[3] & 15) != want:
        print(f"{what}: expected rcode {want} with id {msg[:2].hex()}, got {r[:12].hex()}"); bad += 1
print(f"cases={len(cases)} bad={bad}")

# 10,000 random datagrams, some starting with a plausible header.
rng = random.Random(53)
for i in range(10000):
    n = rng.choice([rng.randrange(0, 12), rng.randrange(12, 64), rng.randrange(64, 1500)])
    m = bytes(rng.getrandbits(8) for _ in range(n))
    if i % 3 == 0 and n >= 12:
        m = m[:2] + bytes([m[2] & 0x7f]) + m[3:4] + b"\0\x01" + m[6:]
    s.send(m)
    if i % 200 == 0:   # drain what came back, so the socket never fills
        s.setblocking(False)
        try:
            while s.recv(65535):
                pass
        except OSError:
            pass
        s.setblocking(True)
print("random=10000")
PY
) || fail "the UDP script failed: $out"
say "$(tr '\n' ';' <<<"$out")"
assert_match "cases=[0-9]+ bad=0" "$out" "every malformed kind answered as expected"
chute_alive
assert_in_net "$(dq after-udp.test.example A)" 198.18.0.0/15 "after the UDP garbage, a normal query is answered"

check "TCP: garbage frames, broken-off messages, a connection flood"
out=$(python3 - "$DNS_PORT" <<'PY'
import socket, struct, sys, time
port = int(sys.argv[1])
def q(qid, n, qtype=1):
    m = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for l in n.split("."):
        m += bytes([len(l)]) + l.encode()
    return m + b"\0" + struct.pack(">HH", qtype, 1)
def fr(m):
    return struct.pack(">H", len(m)) + m
def conn():
    c = socket.create_connection(("127.0.0.1", port), timeout=3)
    return c
def recv_frame(c):
    buf = b""
    while len(buf) < 2 or len(buf) < 2 + struct.unpack(">H", buf[:2])[0]:
        d = c.recv(65535)
        if not d:
            return None
        buf += d
    return buf[2:2 + struct.unpack(">H", buf[:2])[0]]
res = []
# an empty frame and a 5-byte frame, then a good query on the same connection
c = conn()
c.sendall(fr(b"") + fr(b"\x01\x02\x03\x04\x05") + fr(q(7, "tcp1.test.example")))
r = recv_frame(c)
def good(r, qid):
    return "ok" if r and r[:2] == struct.pack(">H", qid) and r[3] & 15 == 0 else repr(r)
res.append(f"after_bad_frames={good(r, 7)}")
# a FORMERR over TCP
c.sendall(fr(struct.pack(">HHHHHH", 8, 0x0100, 0, 0, 0, 0)))
r = recv_frame(c)
res.append(f"tcp_formerr={r[3] & 15 if r else None}")
c.close()
# length prefix promising 65535 bytes, then close half-way
c = conn(); c.sendall(b"\xff\xff" + b"\0" * 1000); c.close()
# one byte of a length prefix, then close
c = conn(); c.sendall(b"\x00"); c.close()
# a forwarded query (TXT), then gone before the upstream answers
c = conn(); c.sendall(fr(q(9, "gone.test.example", 16))); c.close()
# 300 connections held open at once (more than chute keeps)
held = []
for i in range(300):
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=3))
    except OSError:
        break
res.append(f"opened={len(held)}")
for h in held:
    h.close()
time.sleep(0.3)
c = conn()
c.sendall(fr(q(10, "tcp2.test.example")))
r = recv_frame(c)
res.append(f"after_flood={good(r, 10)}")
print(" ".join(res))
PY
) || fail "the TCP script failed: $out"
say "$out"
assert_match "after_bad_frames=ok" "$out" "bad frames do not end the connection: the next query is answered"
assert_match "tcp_formerr=1" "$out" "FORMERR over TCP"
assert_match "after_flood=ok" "$out" "after the flood, a new TCP connection is answered"
chute_alive
assert_in_net "$(dq after-tcp.test.example A)" 198.18.0.0/15 "after the TCP garbage, a normal UDP query is answered"
assert_in_net "$(dq after-tcp2.test.example A +tcp)" 198.18.0.0/15 "and a normal TCP query"
dstats
say "stats: dns_queries=$S_dns_queries dns_formerr=$S_dns_formerr dns_fake=$S_dns_fake"
assert_ge 1000 "$S_dns_formerr" "dns_formerr counts the malformed queries"
chute_stop_within 5
assert_no_log 'ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error: ' "no sanitizer report in chute's log"

say "a DNS listener on a busy port"
python3 - "$E2E_TMP/busy" <<'PY' &
import socket, sys, time
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", 0))
open(sys.argv[1], "w").write(str(u.getsockname()[1]))
time.sleep(60)
PY
E2E_EXTRA_PIDS+=("$!")
for _ in $(seq 100); do [ -s "$E2E_TMP/busy" ] && break; sleep 0.05; done
busy=$(cat "$E2E_TMP/busy")
for mode in fake-ip real-ip; do
    bundle_write "  dns = { mode = \"$mode\", listen = \"127.0.0.1:$busy\", upstream = { \"127.0.0.1:$UP_PORT\" }, persist = false }," <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
    rc=0
    errout=$(timeout 10 "$CHUTE" run "$BUNDLE" 2>&1) || rc=$?
    assert_eq 1 "$rc" "$mode: chute exits with status 1 (not a crash, not running)"
    assert_match "dns\.listen 127\.0\.0\.1 port $busy \(udp\): Address already in use" "$errout" "$mode: the message names the listener"
done
say "pass"
