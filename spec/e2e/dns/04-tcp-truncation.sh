#!/usr/bin/env bash
# DNS over TCP on the loopback listener, and truncation: fake and real
# answers over TCP equal the UDP ones; queries pipelined in one segment or
# dribbled a byte at a time are all answered (RFC 7766); answers too big
# for UDP (a 3,000-byte TXT, 100 A records) come back with TC set and
# nothing else, dig's retry over TCP gets all of them, and chute itself
# fetched them from dnsmasq over TCP after dnsmasq truncated (resolver_tcp).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/dnslib.bash"

dns_init
txt=()
for i in $(seq 12); do
    txt+=("$(printf "s%02d-" "$i")$(head -c 246 /dev/zero | tr '\0' x)")
done
many=()
for i in $(seq 100); do
    many+=("--host-record=many.test.example,10.5.$((i / 256)).$((i % 256)),300")
done
upstream_start --local-ttl=60 "--txt-record=big.test.example,$(IFS=,; echo "${txt[*]}")" "${many[@]}"
dns_bundle 'exclude = { "many.test.example" }, persist = false' <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
dns_chute_start

say "TCP"
u=$(dq a.test.example A)
assert_in_net "$u" 198.18.0.0/15 "UDP: a fake IP ($u)"
assert_eq "$u" "$(dq a.test.example A +tcp)" "TCP: the same fake IP"
t=$(dq b.test.example A +tcp)
assert_in_net "$t" 198.18.0.0/15 "TCP first: a fake IP ($t)"
assert_eq "$t" "$(dq b.test.example A)" "then UDP: the same"
assert_eq 10.5.0.1 "$(dq many.test.example A +tcp | sort -V | head -n 1)" "TCP, forwarded: dnsmasq's records"

check "pipelined and dribbled TCP queries"
out=$(python3 - "$DNS_PORT" <<'PY'
import socket, struct, sys, time
port = int(sys.argv[1])
def query(qid, name):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack(">HH", 1, 1)
def framed(m):
    return struct.pack(">H", len(m)) + m
def read_answers(s, n):
    got, buf = {}, b""
    s.settimeout(5)
    while len(got) < n:
        d = s.recv(65535)
        if not d:
            break
        buf += d
        while len(buf) >= 2 and len(buf) >= 2 + struct.unpack(">H", buf[:2])[0]:
            ln = struct.unpack(">H", buf[:2])[0]
            m, buf = buf[2:2 + ln], buf[2 + ln:]
            qid, flags, qd, an = struct.unpack(">HHHH", m[:8])
            got[qid] = (flags & 0xF, an)
    return got
# three queries in one send, one of them forwarded
s = socket.create_connection(("127.0.0.1", port))
s.sendall(framed(query(11, "p1.test.example")) + framed(query(12, "p2.test.example")) +
          framed(query(13, "many.test.example")))
got = read_answers(s, 3)
print("pipelined", sorted(got.items()))
# one query, a byte at a time
s2 = socket.create_connection(("127.0.0.1", port))
s2.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for b in framed(query(21, "dribble.test.example")):
    s2.send(bytes([b]))
    time.sleep(0.002)
print("dribbled", sorted(read_answers(s2, 1).items()))
PY
)
assert_match "pipelined \[\(11, \(0, 1\)\), \(12, \(0, 1\)\), \(13, \(0, 100\)\)\]" "$out" "three pipelined queries, three answers (100 records for many)"
assert_match "dribbled \[\(21, \(0, 1\)\)\]" "$out" "a query sent a byte at a time is answered"

say "truncation"
dstats A
full=$(dfull big.test.example TXT +ignore +noedns)
assert_match "flags: qr[a-z ]* tc" "$full" "TXT big over UDP without EDNS: TC set"
assert_match "ANSWER: 0," "$full" "the truncated answer carries no records"
dstats B
assert_ge $((A_resolver_tcp + 1)) "$B_resolver_tcp" "chute fetched big.test.example from dnsmasq over TCP"
full=$(dfull big.test.example TXT +ignore)
assert_match "flags: qr[a-z ]* tc" "$full" "TXT big over UDP with EDNS 1232: TC set"
full=$(dfull big.test.example TXT)
assert_match "Truncated, retrying in TCP mode" "$full" "dig retried over TCP"
assert_eq 12 "$(grep -o -E 's[0-9]{2}-x{246}' <<<"$full" | sort -u | wc -l)" "over TCP: all 12 strings of the TXT"
full=$(dfull many.test.example A +ignore)
assert_match "flags: qr[a-z ]* tc" "$full" "100 A records over UDP: TC set"
full=$(dfull many.test.example A)
assert_eq 100 "$(grep -c -E '^many\.test\.example\.[[:space:]]+[0-9]+[[:space:]]+IN[[:space:]]+A[[:space:]]+10\.5\.' <<<"$full")" "over TCP: all 100 A records"
full=$(dfull big.test.example TXT +tcp)
assert_eq 12 "$(grep -o -E 's[0-9]{2}-x{246}' <<<"$full" | sort -u | wc -l)" "dig +tcp: all 12 strings"
e2e_pass
