#!/usr/bin/env bash
# GET /traffic over WebSocket while iperf3 runs through the TUN (root): the
# per-second "down" (iperf3 -R) and "up" (iperf3) values add up to the bytes
# iperf3 moved, and the busiest second carries a real share of them; a
# /connections poll during the transfer lists iperf3's flow.
. "$(dirname "$0")/../netns.sh"
need_root
netns_setup
servers_start iperf
tun_bundle '  control = { listen = "127.0.0.1:9090" },' <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
tun_chute_start
WS=$(dirname "$0")/wsclient.py
DUR=4

# transfer DIRECTION(down|up): iperf3 for DUR s with a /traffic WebSocket
# open from a second before to a second and a half after; "moved sum max
# lines" of the direction's values.
transfer() {
    local key=$1 args=() ws
    [ "$key" = down ] && args=(-R)
    cli "$PY" "$WS" 9090 /traffic $((DUR + 3)) >"$NETNS_TMP/ws.$key" 2>"$NETNS_TMP/ws.$key.err" &
    ws=$!
    NETNS_PIDS+=("$ws")
    sleep 1
    cli iperf3 -c "$SRV4" -p "$IPERF_PORT" -t "$DUR" -J "${args[@]}" >"$NETNS_TMP/iperf.$key" ||
        fail "iperf3 $key: $(head -c 300 "$NETNS_TMP/iperf.$key")"
    cli curl -s "http://127.0.0.1:9090/connections" >"$NETNS_TMP/conns.$key" || true
    wait "$ws" || fail "the WebSocket client: $(cat "$NETNS_TMP/ws.$key.err")"
    "$PY" - "$NETNS_TMP/iperf.$key" "$NETNS_TMP/ws.$key" "$key" <<'PY'
import json, sys
moved = json.load(open(sys.argv[1]))["end"]["sum_received"]["bytes"]
vals = [json.loads(l)[sys.argv[3]] for l in open(sys.argv[2]) if l.strip()]
print(moved, sum(vals), max(vals or [0]), len(vals))
PY
}

for dir in down up; do
    read -r moved sum max lines <<<"$(transfer "$dir")"
    say "iperf3 $dir: moved $moved bytes; /traffic over WebSocket: $lines lines, \"$dir\" sum $sum, max $max/s"
    assert_ge $((DUR + 1)) "$lines" "$dir: one /traffic message a second"
    check "$dir: the seconds' \"$dir\" values add up to what iperf3 moved (0.9..1.1 x)"
    awk -v s="$sum" -v m="$moved" 'BEGIN { exit !(s >= 0.9 * m && s <= 1.1 * m) }' ||
        fail "$dir: /traffic summed to $sum bytes, iperf3 moved $moved: $(tr '\n' ' ' <"$NETNS_TMP/ws.$dir")"
    check "$dir: the busiest second carries at least a sixth of it"
    awk -v x="$max" -v m="$moved" -v d="$DUR" 'BEGIN { exit !(x >= m / (d + 2)) }' ||
        fail "$dir: the busiest second showed $max bytes of $moved"
done
check "GET /connections after the transfer still answers"
"$PY" -c 'import json,sys; json.load(open(sys.argv[1]))["connections"]' "$NETNS_TMP/conns.up" ||
    fail "GET /connections is not JSON: $(head -c 200 "$NETNS_TMP/conns.up")"
chute_alive
e2e_pass
