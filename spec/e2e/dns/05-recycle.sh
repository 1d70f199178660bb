#!/usr/bin/env bash
# Fake-IP pool recycling with fake_ip_size = 1000 across 100,000 names
# asked over UDP (256 in flight): every answer is a fake IP; once the pool
# is full each new name takes the address of the least recently used one
# (checked against an LRU model fed with chute's own answers); a name asked
# every 500 names never loses its address; the last 999 names all keep
# theirs; the first name's address went to another name, and asking it
# again gives a fresh mapping; the pool holds 1000 mappings at most, in
# <= 128 bytes each.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/dnslib.bash"

dns_init
upstream_start
dns_bundle 'fake_ip_size = 1000, persist = false' <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
dns_chute_start

check "100,000 names, then the LRU checks"
start=$(now)
out=$(python3 - "$DNS_PORT" <<'PY'
import collections, ipaddress, socket, struct, sys, time
port, N, POOL, WINDOW = int(sys.argv[1]), 100000, 1000, 256
NET = ipaddress.ip_network("198.18.0.0/15")

def query(qid, name):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack(">HH", 1, 1)

def answer_ip(m):
    qid, flags, qd, an = struct.unpack(">HHHH", m[:8])
    if flags & 0xF or an != 1 or len(m) < 4:
        return qid, None
    return qid, socket.inet_ntoa(m[-4:])   # one A record, last in the message

s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.connect(("127.0.0.1", port))
s.settimeout(5)

# The sequence: n0..n99999, with "keep.test.example" after every 500th name.
seq = []
for i in range(N):
    seq.append(f"n{i}.test.example")
    if i % 500 == 499:
        seq.append("keep.test.example")

def ask(names):
    """Ask in order, WINDOW in flight; chute answers one socket in order."""
    got, sent, t0 = [None] * len(names), 0, time.time()
    inflight = 0
    while sent < len(names) and inflight < WINDOW:
        s.send(query(sent & 0xFFFF, names[sent])); sent += 1; inflight += 1
    done = 0
    while done < len(names):
        try:
            m = s.recv(4096)
        except socket.timeout:
            print(f"lost answers: {len(names) - done} unanswered after 5 s"); sys.exit(1)
        qid, ip = answer_ip(m)
        # IDs wrap at 65536: the oldest unanswered index with this ID
        idx = done + ((qid - done) & 0xFFFF)
        if idx >= len(names) or got[idx] is not None:
            print(f"stray answer id {qid}"); sys.exit(1)
        got[idx] = ip or "none"
        while done < len(names) and got[done] is not None:
            done += 1
        inflight -= 1
        if sent < len(names):
            s.send(query(sent & 0xFFFF, names[sent])); sent += 1; inflight += 1
    return got, time.time() - t0

got, secs = ask(seq)
print(f"asked={len(seq)} secs={secs:.2f} qps={len(seq) / secs:.0f}")
bad = [(n, a) for n, a in zip(seq, got) if a == "none" or ipaddress.ip_address(a) not in NET]
print(f"not_fake={len(bad)} {bad[:3]}")

# LRU model fed with chute's answers: name -> address, most recent last.
lru = collections.OrderedDict()
wrong = keep_moved = 0
first_of = {}
for n, a in zip(seq, got):
    if n in lru:
        if lru[n] != a:
            wrong += 1          # a live name must keep its address
            if n == "keep.test.example":
                keep_moved += 1
        lru.move_to_end(n)
    else:
        if len(lru) >= POOL:
            victim, vaddr = lru.popitem(last=False)
            if vaddr != a:
                wrong += 1      # a new name takes the LRU name's address
        lru[n] = a
    first_of.setdefault(n, a)
print(f"lru_mismatch={wrong} keep_moved={keep_moved}")
addrs = list(lru.values())
print(f"live={len(lru)} distinct={len(set(addrs))}")
a0 = first_of["n0.test.example"]
later = [n for n, a in zip(seq, got) if a == a0 and n != "n0.test.example"]
print(f"n0_address_reused={len(later) > 0}")

# Ask the last 999 names again: all still mapped, same addresses.
tail = [f"n{i}.test.example" for i in range(N - 999, N)]
again, _ = ask(tail)
print(f"tail_changed={sum(1 for n, a in zip(tail, again) if a != lru[n])}")
# n0 again: a fresh mapping, the LRU name's address (the oldest live one
# after the re-asked tail is keep.test.example)
for n in tail:
    lru.move_to_end(n)
oldest = next(iter(lru))
n0, _ = ask(["n0.test.example"])
print(f"n0_again_in_pool={ipaddress.ip_address(n0[0]) in NET} n0_again_is_lru_addr={n0[0] == lru[oldest]} oldest={oldest}")
PY
) || fail "the query script failed: $out"
say "$(tr '\n' ' ' <<<"$out")"
say "took $(elapsed "$start")s"
assert_match "^asked=100200 " "$out" "100,200 queries answered"
assert_match "not_fake=0 " "$out" "every answer is one fake IP"
assert_match "lru_mismatch=0 keep_moved=0" "$out" "new names take the least recently used address; live names keep theirs"
assert_match "live=1000 distinct=1000" "$out" "the last 1000 mappings hold 1000 distinct addresses"
assert_match "n0_address_reused=True" "$out" "the first name's address was recycled to another name"
assert_match "tail_changed=0" "$out" "the last 999 names, asked again, keep their addresses"
assert_match "n0_again_in_pool=True n0_again_is_lru_addr=True oldest=keep.test.example" "$out" \
    "the first name asked again gets a new mapping: the LRU name's (keep.test.example) address"
secs=$(sed -n -E 's/.* secs=([0-9.]+) .*/\1/p' <<<"$out")
check "100,200 queries in seconds, not minutes (${secs}s)"
lt "$secs" 30 || fail "100,200 queries took ${secs}s"

dstats
say "stats: dns_fake=$S_dns_fake dns_fake_entries=$S_dns_fake_entries dns_fake_bytes=$S_dns_fake_bytes dns_queries=$S_dns_queries"
assert_eq 1000 "$S_dns_fake_entries" "dns_fake_entries = fake_ip_size"
assert_eq 101200 "$S_dns_fake" "every query was a fake answer"
per=$((S_dns_fake_bytes / S_dns_fake_entries))
check "bytes per mapping: $per <= 128"
[ "$per" -le 128 ] || fail "$S_dns_fake_bytes bytes for $S_dns_fake_entries mappings: $per each"
assert_eq 0 "$S_resolver_sent" "nothing went upstream"
e2e_pass
