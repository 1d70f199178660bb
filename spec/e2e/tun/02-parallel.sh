#!/usr/bin/env bash
# 500 connections open at once through the TUN, each fetching the small
# file: every body exact, every flow logged once and closed normally.
# Round 1 runs with the decision cache off: route() runs exactly once per
# flow (route_calls grows by 500). Round 2, after a SIGHUP to the same
# script with the cache on: route() runs once, the other 499 flows take
# the cached decision. The fast path carries the non-SYN segments.
. "$(dirname "$0")/../netns.sh"
need_root
netns_setup
servers_start http
N=500
ROUTE='function chute.route(flow)
  return "DIRECT"
end'
tun_bundle "  decision_cache = 0," <<<"$ROUTE"
tun_chute_start

parallel_round() { # ROUND: N connections at once, each GET /small
    local t0 out
    t0=$(now)
    check "round $1: $N parallel connections through the TUN all get the small file"
    out=$(cli_py "$SRV4" "$HTTP_PORT" "$N" <"$NETNS_TMP/par.py") || fail "the parallel client failed: $out"
    say "round $1: $(tail -n 1 <<<"$out") in $(elapsed "$t0")s"
    assert_eq "connected=$N ok=$N pending=0" "$(tail -n 1 <<<"$out")" "round $1: all $N connected and got the exact body"
}

cat >"$NETNS_TMP/par.py" <<'PY'
import selectors, socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
want = b"hello from the tun e2e server\n"
sel = selectors.DefaultSelector()
socks = []
# Every connection is opened before any request is sent: all n are open at once.
for i in range(n):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    s.connect_ex((host, port))
    socks.append(s)
    sel.register(s, selectors.EVENT_WRITE, i)
bufs = [b""] * n
state = ["connecting"] * n
deadline = time.time() + 30
left = n
connected = 0
while left and time.time() < deadline:
    for key, ev in sel.select(timeout=1):
        s, i = key.fileobj, key.data
        if state[i] == "connecting":
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                print(f"conn {i}: connect error {err}")
                sel.unregister(s); left -= 1; state[i] = "error"; continue
            connected += 1
            state[i] = "connected"
            if connected == n:
                # all open: now ask on every one
                for j, t in enumerate(socks):
                    if state[j] == "connected":
                        t.send(b"GET /small HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                        state[j] = "reading"
                        sel.modify(t, selectors.EVENT_READ, j)
            else:
                sel.modify(s, selectors.EVENT_READ, i)  # parked until all connect
            continue
        if state[i] == "connected":
            # readable before the request: the peer closed or reset
            print(f"conn {i}: readable before its request")
            sel.unregister(s); left -= 1; state[i] = "error"; continue
        try:
            d = s.recv(65536)
        except OSError as e:
            print(f"conn {i}: {e}"); sel.unregister(s); left -= 1; state[i] = "error"; continue
        if d:
            bufs[i] += d
            continue
        sel.unregister(s); s.close(); left -= 1
        state[i] = "ok" if bufs[i].startswith(b"HTTP/1.1 200") and bufs[i].endswith(b"\r\n\r\n" + want) else "bad"
        if state[i] == "bad":
            print(f"conn {i}: bad response {bufs[i][:200]!r}")
ok = state.count("ok")
print(f"connected={connected} ok={ok} pending={left}")
PY

# ---- round 1: no decision cache
stats_read B
parallel_round 1
check "$N flow lines to :$HTTP_PORT, all DIRECT by route() and closed normally"
got=$(wait_log_count "-> $SRV4:$HTTP_PORT policy=DIRECT rule=\"route\" .* close=done" "$N" 10)
assert_eq "$N" "$got" "flow lines decided by route() with close=done"
assert_eq "$N" "$(flow_lines "-> $SRV4:$HTTP_PORT " | wc -l)" "flow lines to :$HTTP_PORT in all"
peak=$(peak_flows "-> $SRV4:$HTTP_PORT ")
say "peak concurrent flows from the log: $peak"
assert_ge "$N" "$peak" "all $N flows were open at once"

stats_read A
say "stats: flows_total $B_flows_total -> $A_flows_total, tcp_total $B_tcp_total -> $A_tcp_total, route_calls $B_route_calls -> $A_route_calls, fast_path=$A_fast_path syn_dups=$A_syn_dups heap_max=$A_heap_max"
assert_ge "$N" "$((A_flows_total - B_flows_total))" "flows_total grew by >= $N"
assert_ge "$N" "$((A_tcp_total - B_tcp_total))" "tcp_total grew by >= $N"
assert_eq "$((A_flows_total - B_flows_total))" "$((A_route_calls - B_route_calls))" \
    "route_calls grew exactly as flows_total (route() once per flow)"
assert_eq "$A_flows_total" "$A_route_calls" "route_calls == flows_total since start"
assert_eq 0 "$A_flows_active" "no flow left open"
assert_eq 0 "$A_tcp_active" "no TUN TCP connection left open"
assert_ge 1 "$A_fast_path" "fast_path > 0"
assert_ge "$((N * 3))" "$((A_fast_path - B_fast_path))" "fast_path took the non-SYN segments (>= 3 per connection)"
assert_eq 0 "$A_route_errors" "no route() errors"

# ---- round 2: the same script with the decision cache on (the default)
tun_bundle <<<"$ROUTE"
kill -HUP "$CHUTE_PID"
assert_log "reloaded .*rule version 2" "chute reloaded with the decision cache on"
parallel_round 2
got=$(wait_log_count "-> $SRV4:$HTTP_PORT policy=DIRECT $RULE_RE .* close=done" "$((2 * N))" 10)
assert_eq "$((2 * N))" "$got" "flow lines with close=done after both rounds"
stats_read C
say "stats: route_calls $A_route_calls -> $C_route_calls, dcache_hits ${A_dcache_hits:-} -> ${C_dcache_hits:-}"
assert_eq "$N" "$((C_flows_total - A_flows_total))" "round 2: $N more flows"
assert_eq 1 "$((C_route_calls - A_route_calls))" "round 2: route() ran once, for the first flow"
assert_eq "$((N - 1))" "$((C_dcache_hits - ${A_dcache_hits:-0}))" "round 2: the other $((N - 1)) took the cached decision"
assert_eq "$((N - 1))" "$(flow_lines "rule=\"route \(cached\)\"" | wc -l)" "flow lines marked rule=\"route (cached)\""
assert_decided_once C
chute_alive
pass
