#!/usr/bin/env bash
# A slow DNS upstream (issue 19, Faults), on loopback: chute in real-ip
# mode with dns.timeout = 1 (per attempt, 2 passes) over a slow upstream
# (first) and a healthy one. An answer just under the timeout (0.6 s)
# comes from the slow one; one past it (2.5 s) comes from the healthy one
# after about 1 s; a name neither answers is SERVFAIL within 4 attempts
# (bound 5 s). Then 3,000 new names in ~1.5 s from one client: every one is
# answered (SERVFAIL when it waited among the oldest past the cap of 256
# waiting queries, dns_pending_dropped counts them, one log line), waiting
# queries and descriptors stay bounded meanwhile, cached names and other
# clients are answered within 0.9 s throughout, and afterwards nothing is
# left waiting, RSS is within 8 MiB and descriptors within 10 of the
# baseline. ~20 s.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hostile.bash"

need_cmd dig
e2e_init
read -r DNS_PORT SLOW FAST < <(e2e_ports 3) || fail "e2e_ports: no 3 free ports"
fault_peer dnsslow "$SLOW"
fault_peer dnsfast "$FAST"
bundle_write "  dns = { listen = \"127.0.0.1:$DNS_PORT\", mode = \"real-ip\", persist = false,
          upstream = { \"127.0.0.1:$SLOW\", \"127.0.0.1:$FAST\" }, timeout = 1 }," <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
chute_start
wait_port 127.0.0.1 "$DNS_PORT" 10 || fail "chute's DNS listener does not accept TCP"

# timed NAME [DIG_ARGS...]: "SECONDS STATUS ANSWER" for one query at chute.
timed() {
    local start out st ans
    start=$(now)
    out=$(dig @127.0.0.1 -p "$DNS_PORT" "$@" A +time=8 +tries=1 2>&1 || true)
    st=$(sed -n -E 's/.*status: ([A-Z]+),.*/\1/p' <<<"$out" | head -n 1)
    ans=$(awk '/ANSWER SECTION/ { a = 1; next } a && NF == 5 && $4 == "A" { print $5; exit }' <<<"$out")
    echo "$(elapsed "$start") ${st:-none} ${ans:--}"
}

read -r t st ans < <(timed cached.test)
assert_eq "NOERROR 127.0.0.2" "$st $ans" "a name the slow upstream answers at once ($t s)"
baseline

say "an answer just under the timeout comes from the slow upstream"
read -r t st ans < <(timed under-1.test)
# The answer's address says it beat the timeout; dig's own start is in $t.
check "under-1.test: $st $ans in $t s (the slow upstream's 127.0.0.2, in 0.5..2.5 s: past 1 s the healthy one would have answered)"
[ "$st $ans" = "NOERROR 127.0.0.2" ] && lt 0.5 "$t" && lt "$t" 2.5 || fail "under the timeout: $st $ans in $t s"

say "past the timeout, the healthy upstream answers"
read -r before < <(stat_of resolver_timeouts)
read -r t st ans < <(timed over-1.test)
check "over-1.test: $st $ans in $t s (the healthy upstream's 127.0.0.3, in 0.9..3.5 s)"
[ "$st $ans" = "NOERROR 127.0.0.3" ] && lt 0.9 "$t" && lt "$t" 3.5 || fail "past the timeout: $st $ans in $t s"
read -r after < <(stat_of resolver_timeouts)
assert_ge $((before + 1)) "$after" "resolver_timeouts counts the slow attempt ($before -> $after)"

say "a name no upstream answers"
read -r t st ans < <(timed dead-1.test)
check "dead-1.test: $st in $t s (SERVFAIL after 4 attempts of 1 s, bound 8 s)"
[ "$st" = SERVFAIL ] && lt 3.5 "$t" && lt "$t" 8 || fail "no answer upstream: $st in $t s"

say "3000 new names in 1.5 s from one client, others asking meanwhile"
python3 - "$DNS_PORT" >"$E2E_TMP/flood.out" 2>&1 <<'PY' &
import socket, struct, sys, time
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.connect(("127.0.0.1", port))
def q(i):
    label = b"flood-%d" % i
    return (struct.pack("!HHHHHH", i, 0x0100, 1, 0, 0, 0) + bytes([len(label)]) + label +
            b"\x04test\x00\x00\x01\x00\x01")
N = 3000
got, rcode = set(), {}
def drain(wait):
    s.settimeout(wait)
    while True:
        try:
            a = s.recv(4096)
        except (socket.timeout, BlockingIOError):
            return
        got.add(struct.unpack("!H", a[:2])[0])
        rcode[a[3] & 15] = rcode.get(a[3] & 15, 0) + 1
t0 = time.monotonic()
for i in range(N):
    s.send(q(i))
    if i % 50 == 49:
        drain(0)
        time.sleep(max(0, t0 + 1.5 * (i + 1) / N - time.monotonic()))
end = time.monotonic() + 8
while len(got) < N and time.monotonic() < end:
    drain(0.2)
print("sent %d, answered %d, NOERROR %d, SERVFAIL %d" % (N, len(got), rcode.get(0, 0), rcode.get(2, 0)))
sys.exit(0 if len(got) == N else 1)
PY
fl=$!
peak_pending=0 peak_fds=0 slowest=0
for i in $(seq 8); do
    sleep 0.2
    read -r pend < <(stat_of dns_pending)
    fds=$(fd_count)
    [ "$pend" -gt "$peak_pending" ] && peak_pending=$pend
    [ "$fds" -gt "$peak_fds" ] && peak_fds=$fds
    read -r t st ans < <(timed cached.test)
    [ "$st $ans" = "NOERROR 127.0.0.2" ] || fail "during the flood: the cached name got $st $ans"
    lt "$slowest" "$t" && slowest=$t
    read -r t st ans < <(timed cached.test -b 127.0.0.9)
    [ "$st $ans" = "NOERROR 127.0.0.2" ] || fail "during the flood: another client got $st $ans"
    lt "$slowest" "$t" && slowest=$t
done
# Under the 1 s upstream timeout: never queued behind the slow upstream.
check "during the flood: cached names answered for two clients, the slowest in $slowest s (bound 0.9 s)"
lt "$slowest" 0.9 || fail "a cached name took $slowest s during the flood"
check "waiting queries peaked at $peak_pending (cap 256), descriptors at $peak_fds ($BASE_FDS before, bound +300)"
[ "$peak_pending" -le 256 ] && [ "$peak_fds" -le $((BASE_FDS + 300)) ] || fail "unbounded while the upstream is slow"
wait "$fl" || fail "the flooding client was left without answers: $(cat "$E2E_TMP/flood.out")"
check "flood: $(cat "$E2E_TMP/flood.out") (every query answered)"
{ read -r dropped; read -r pend; } < <(stat_of dns_pending_dropped dns_pending)
assert_ge 1 "$dropped" "dns_pending_dropped counts the queries answered early ($dropped)"
lines=$(log_count 'forwarded queries are waiting for the upstreams')
assert_eq 1 "$lines" "one log line for the cap, not one per query ($lines)"
assert_eq 0 "$pend" "nothing left waiting afterwards (dns_pending)"

read -r t st ans < <(timed over-2.test)
check "after: over-2.test: $st $ans in $t s"
[ "$st $ans" = "NOERROR 127.0.0.3" ] && lt "$t" 2 || fail "after the flood: $st $ans in $t s"
sleep 1
assert_no_leak 8 10
chute_stop_within 5
e2e_pass
