#!/usr/bin/env bash
# chute_options.memory_limit = 15 MiB (examples/embed/host -L 15M): 1,000
# concurrent 1 MiB downloads through the host, every body sha256-equal,
# while the host's RSS (VmRSS, sampled every 100 ms) never goes above the
# limit; then more connections than the TCP cap at once: the ones past it
# are refused (RST), counted in flows_refused and logged, and the engine
# goes on; UDP mappings past theirs close the oldest, counted too. Before that, what chute check says of chute.config's
# memory_limit: a size below the floor, a bad size, and rule sets over
# their share (the message names the size and the limit).
. "$(dirname "$0")/../netns.sh"
. "$(dirname "$0")/host.bash"
need_root

LIMIT_KB=$((15 * 1024))
assert_le() {
    local max=$1 got=$2 msg=$3
    check "$msg"
    [ "$got" -le "$max" ] 2>/dev/null || fail "$msg: expected <= $max, got '$got'"
}
FLOWS=1000

# ---- chute.config { memory_limit = ... } -----------------------------------
netns_setup
cfg=$NETNS_TMP/cfg
mkdir -p "$cfg"
check "memory_limit = \"4M\" is refused at its line"
printf 'local chute = require "chute"\nchute.config {\n  memory_limit = "4M",\n}\n' >"$cfg/main.lua"
out=$("$CHUTE" check "$cfg" 2>&1) && fail "chute check took memory_limit = 4M"
assert_match 'main.lua:3: .*memory_limit: must be at least 8 MiB' "$out" "the floor, at the key's line"
check "memory_limit = \"15 parsecs\" is refused"
printf 'local chute = require "chute"\nchute.config { memory_limit = "15 parsecs" }\n' >"$cfg/main.lua"
out=$("$CHUTE" check "$cfg" 2>&1) && fail "chute check took a bad size"
assert_match 'memory_limit: expected a size' "$out" "what a size is"
check "rule sets over their share of memory_limit are refused, naming both"
"$PY" -c '
import sys
with open(sys.argv[1], "w") as f:
    for i in range(100000):
        f.write("DOMAIN-SUFFIX,host%d.example%d.com\n" % (i, i % 997))' "$cfg/big.list"
printf 'local chute = require "chute"\nchute.config { memory_limit = "8M", listen = { socks = "127.0.0.1:10800" } }\nlocal r = chute.ruleset "big.list"\nfunction chute.route(f) return "DIRECT" end\n' >"$cfg/main.lua"
out=$("$CHUTE" check "$cfg" 2>&1) && fail "chute check took 100k rules at 8 MiB"
assert_match "rule sets take [0-9.]+ MiB, over their share of memory_limit = 8 MiB \([0-9.]+ MiB\)" "$out" \
    "the rule sets' size and the limit"
check "a Lua state over its share of memory_limit is refused, naming both"
printf 'local chute = require "chute"\nchute.config { memory_limit = "8M", listen = { socks = "127.0.0.1:10800" } }\nlocal keep = {}\nfor i = 1, 40000 do keep[i] = string.rep("x", 40) .. i end\nfunction chute.route(f) return keep[1] and "DIRECT" end\n' >"$cfg/main.lua"
out=$("$CHUTE" check "$cfg" 2>&1) && fail "chute check took 3 MiB of Lua at 8 MiB"
assert_match "main.lua: the bundle holds [0-9.]+ MiB of Lua after loading, over its share of memory_limit = 8.0 MiB \(0.5 MiB\)" \
    "$out" "the Lua state's size and the limit"
printf 'local chute = require "chute"\nchute.config { memory_limit = "15M", listen = { socks = "127.0.0.1:10800" } }\nlocal r = chute.ruleset "big.list"\nfunction chute.route(f) return "DIRECT" end\n' >"$cfg/main.lua"
"$CHUTE" check "$cfg" >/dev/null 2>&1 || fail "chute check refused 100k rules at 15 MiB: $("$CHUTE" check "$cfg" 2>&1)"

# ---- 1,000 concurrent bulk flows at 15 MiB ------------------------------------
servers_start http udp
embed_tun_up
embed_bundle <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
ulimit -n 8192 # a flow is an upstream socket
HOST_ARGS="-L 15M" embed_host_start
assert_log "memory_limit 15 MiB: lwIP heap" "the host's limit is sized"
tcp_cap=$(sed -n -E 's/.*memory_limit 15 MiB: .* ([0-9]+) TCP \+ [0-9]+ UDP flows.*/\1/p' "$CHUTE_LOG" | tail -n 1)
[ -n "$tcp_cap" ] || fail "no TCP cap in the log"
assert_ge "$FLOWS" "$tcp_cap" "the TCP cap at 15 MiB leaves room for $FLOWS flows"

# VmRSS of the host every 100 ms, from before the first flow to the end.
rss_log=$NETNS_TMP/rss
(while kill -0 "$CHUTE_PID" 2>/dev/null; do
    sed -n -E 's/^VmRSS:[[:space:]]+([0-9]+) kB/\1/p' "/proc/$CHUTE_PID/status" 2>/dev/null
    sleep 0.1
done) >"$rss_log" &
sampler=$!
NETNS_PIDS+=("$sampler")

CLIENTS=$(dirname "$0")/clients.py

check "$FLOWS concurrent 1 MiB downloads through the host at memory_limit 15 MiB"
t0=$(now)
res=$(cli "$PY" "$CLIENTS" "$SRV4" "$HTTP_PORT" "$FLOWS" get "$SHA_1M") || fail "the clients failed: $res"
say "$res in $(elapsed "$t0")s"
chute_alive
assert_match "connected=$FLOWS refused=0 ok=$FLOWS bad=0 failed=0 unfinished=0" "$res" \
    "every flow connected and its body is sha256-equal"
stats_read
say "stats: flows_total=$S_flows_total heap_max=$S_heap_max heap_size=$S_heap_size heap_errors=$S_heap_errors mem_pauses=$S_mem_pauses rx_drops=$S_rx_drops"
assert_ge "$FLOWS" "$S_flows_total" "the downloads were flows of the packet path"
assert_le $((16 * 1024 * 1024 - 1)) "$S_heap_size" "lwIP's heap is capped below its build size"
assert_le "$S_heap_size" "$S_heap_max" "lwIP's heap stayed within its cap"

# ---- past the cap ----------------------------------------------------------------
over=$((tcp_cap + 300))
check "$over connections at once: the ones past the cap of $tcp_cap are refused and counted"
fifo=$NETNS_TMP/hold.in
mkfifo "$fifo"
cli "$PY" "$CLIENTS" "$SRV4" "$HTTP_PORT" "$over" hold <"$fifo" >"$NETNS_TMP/hold.out" &
holder=$!
NETNS_PIDS+=("$holder")
exec 7>"$fifo"
for i in $(seq 600); do
    grep -q connected= "$NETNS_TMP/hold.out" && break
    sleep 0.1
done
res=$(cat "$NETNS_TMP/hold.out")
say "$res"
chute_alive
connected=$(sed -n -E 's/.*connected=([0-9]+).*/\1/p' <<<"$res")
refused=$(sed -n -E 's/.*refused=([0-9]+).*/\1/p' <<<"$res")
[ -n "$connected" ] || fail "the holding client said nothing"
assert_le "$tcp_cap" "$connected" "no more connections than the cap were taken"
assert_ge 250 "$refused" "the connections past the cap were refused (RST)"
stats_read
assert_ge "$refused" "$S_flows_refused" "flows_refused counts them"
assert_log "flow: TCP flows at the memory_limit's cap of $tcp_cap: a new one gets a RST" \
    "the refusals are logged"
lines=$(log_count "memory_limit's cap of")
assert_le 2 "$lines" "logged once per interval, not once per flow"
exec 7>&-
wait "$holder" 2>/dev/null || true

udp_cap=$(sed -n -E 's/.*memory_limit 15 MiB: .* [0-9]+ TCP \+ ([0-9]+) UDP flows.*/\1/p' "$CHUTE_LOG" | tail -n 1)
check "$((udp_cap + 100)) UDP mappings: past the cap of $udp_cap the oldest close, counted"
before=$S_flows_refused
got=$(cli "$PY" -c '
import socket, sys
n, host, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
ok = 0
for s in socks:
    s.settimeout(2)
    s.sendto(b"x", (host, port))
    try:
        ok += s.recv(10) == b"x"
    except OSError:
        pass
print(ok)' $((udp_cap + 100)) "$SRV4" "$ECHO_PORT") || fail "the UDP clients failed"
assert_eq $((udp_cap + 100)) "$got" "every datagram was echoed (a new mapping takes the oldest's place)"
stats_read
assert_ge $((before + 100)) "$S_flows_refused" "the mappings past the cap count in flows_refused"
assert_log "flow: UDP flows at the memory_limit's cap of $udp_cap" "and are logged"

check "after the burst, a new download works"
got=$(cli_fetch_sha --max-time 30 "http://$SRV4/1m.bin")
assert_eq "$SHA_1M" "$got" "a 1 MiB download's sha256"

kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
samples=$(wc -l <"$rss_log")
peak=$(sort -n "$rss_log" | tail -n 1)
say "RSS: $samples samples every 100 ms, peak $peak kB (limit $LIMIT_KB kB)"
assert_ge 20 "$samples" "RSS was sampled through the run"
# ASan's shadow memory and quarantine are not the engine's: under it the
# bound says nothing (the Release build's run checks it).
if grep -q -a __asan_init "$CHUTE" 2>/dev/null; then
    say "an ASan build: the RSS bound is checked by the Release build's run"
else
    assert_le "$LIMIT_KB" "$peak" "the host's RSS never went above memory_limit"
fi

chute_stop_within 10
pass "peak RSS $peak kB"
