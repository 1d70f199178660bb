#!/usr/bin/env bash
# shellcheck disable=SC2154 # pool_read and stats_read set PREFIX_key variables
# Pools of SOCKS5 and https proxies through the TUN, the servers 50 ms
# away (delay_link_start, as in 11-pool.sh):
# - SOCKS5 pools hold greeted and authenticated connections: through
#   microsocks with RFC 1929 auth, a new flow's time to first byte with
#   the pool ("s5p") is lower than without ("s5c") by at least two round
#   trips (TCP, greeting and auth are off its path: only the CONNECT is
#   left);
# - a pooled plain SOCKS5 connection is spliced by the relay (a flow from
#   the SOCKS5 inbound: the relay's pipes show in chute's descriptors);
# - servers that close idle connections after 5 s (proxypeer.py: SOCKS5
#   "s5i", and an https proxy "htp", i.e. TLS with CONNECT inside) cost no
#   failed request, and discarded_dead counts the connections they closed;
#   the https pool resumes its TLS sessions;
# - 200 parallel new flows at once open no more connections at the server
#   than the 200 flows' own plus the pool's max_idle.
. "$(dirname "$0")/outlib.bash"
need_root
need_cmd microsocks openssl
netns_setup
servers_start http
delay_link_start 0 50
RTT=0.050
MAX_IDLE=4
bg_in "$NS_SRV" "$NETNS_TMP/microsocks.log" microsocks -i "$DL_SRV4" -p 1080 -u pu -P pp
wait_tcp "$NS_SRV" "$DL_SRV4" 1080 10 || fail "microsocks did not start"
peer_start s5i socks5 "$DL_SRV4" 1081 --user pu --pass pp --idle-close 5
self_cert "$NETNS_TMP/htp" proxy.test
peer_start htp http "$DL_SRV4" 8443 --cert "$NETNS_TMP/htp/srv.crt" --key "$NETNS_TMP/htp/srv.key" --idle-close 5
SOCKS=127.0.0.1:1080

tun_bundle "  listen = { socks = \"$SOCKS\" }," <<LUA
chute.proxy "s5p" { type = "socks5", server = "$DL_SRV4", port = 1080, username = "pu", password = "pp",
                    pool = { max_idle = $MAX_IDLE, idle_timeout = 60 } }
chute.proxy "s5c" { type = "socks5", server = "$DL_SRV4", port = 1080, username = "pu", password = "pp" }
chute.proxy "s5i" { type = "socks5", server = "$DL_SRV4", port = 1081, username = "pu", password = "pp",
                    pool = { max_idle = $MAX_IDLE, idle_timeout = 60 } }
chute.proxy "htp" { type = "https", server = "$DL_SRV4", port = 8443, sni = "proxy.test",
                    skip_cert_verify = true, pool = { max_idle = $MAX_IDLE, idle_timeout = 60 } }
function chute.route(flow)
  if flow.inbound == "socks" then return "s5p" end
  local alt = flow.dst_port == $ALT_PORT
  if flow.dst_ip == "$SRV6" then return alt and "htp" or "s5i" end
  return alt and "s5c" or "s5p"
end
LUA
tun_chute_start

ttfb() {
    cli_curl -o /dev/null -w '%{time_starttransfer}\n' -H "Connection: close" --max-time 10 "$1" ||
        fail "a fetch of $1 failed"
}
U_P="http://$SRV4:$HTTP_PORT/small" U_C="http://$SRV4:$ALT_PORT/small"
U_I="http://[$SRV6]:$HTTP_PORT/small" U_H="http://[$SRV6]:$ALT_PORT/small"

check "a first fetch through each proxy (cold)"
for u in "$U_P" "$U_C" "$U_I" "$U_H"; do ttfb "$u" >/dev/null; done
sleep 0.5

N=${POOL_FETCHES:-10}
check "$N sequential fetches through microsocks (auth), pool on and off, alternating"
on=() off=()
for _ in $(seq "$N"); do
    on+=("$(ttfb "$U_P")")
    off+=("$(ttfb "$U_C")")
    sleep 0.2
done
m_on=$(printf '%s\n' "${on[@]}" | median)
m_off=$(printf '%s\n' "${off[@]}" | median)
say "socks5 median time to first byte: pool on ${m_on}s, off ${m_off}s, saved $(awk -v a="$m_on" -v b="$m_off" 'BEGIN { printf "%.3f", b - a }')s (RTT ${RTT}s)"
say "pool on:  ${on[*]}"
say "pool off: ${off[*]}"
lt "$(awk -v a="$m_on" -v r="$RTT" 'BEGIN { print a + 2 * r }')" "$m_off" ||
    fail "the socks5 pool saves less than two round trips: on ${m_on}s, off ${m_off}s"
stats_read
pool_read s5p P
say "$(grep -E ' pool s5p ' "$CHUTE_LOG" | tail -n 1 | cut -c25-)"
assert_ge $((N - 1)) "$P_warm" "s5p: warm hand-outs"
assert_eq 0 "$P_retried" "s5p: retried hand-outs"
[ "$(grep -c -E ' pool s5c ' "$CHUTE_LOG")" = 0 ] || fail "s5c (no pool) has a pool"

check "a pooled plain SOCKS5 connection is spliced (a flow from the SOCKS5 inbound)"
pipes() { find "/proc/$CHUTE_PID/fd" -lname 'pipe:*' 2>/dev/null | wc -l; }
base=$(pipes)
ip netns exec "$NS_CLI" curl -s -o /dev/null --limit-rate 100k --max-time 30 --socks5 "$SOCKS" \
    "http://$SRV4:$HTTP_PORT/1m.bin" &
CURL=$!
NETNS_PIDS+=("$CURL")
# The download lasts ~10 s; under a loaded CI its relay may start late: look
# until the pipes are there (or the download ends without them).
for _ in $(seq 80); do
    sleep 0.1
    during=$(pipes)
    [ "$during" -ge $((base + 2)) ] && break
    kill -0 "$CURL" 2>/dev/null || break
done
wait "$CURL" || fail "the download through the SOCKS5 inbound failed"
say "chute's pipes: $base before, $during during the download"
assert_ge $((base + 2)) "$during" "the relay's splice pipes while the pooled flow runs"
assert_log "tcp socks .* policy=s5p .*close=done" "the inbound flow's line names s5p"

check "servers that close idle connections after 5 s: no failed request"
stats_read
pool_read s5i I0
pool_read htp H0
for gap in 5.5 4.9 5.0 5.1 6; do
    ttfb "$U_I" >/dev/null
    ttfb "$U_H" >/dev/null
    sleep "$gap"
done
ttfb "$U_I" >/dev/null
ttfb "$U_H" >/dev/null
stats_read
pool_read s5i I
pool_read htp H
say "$(grep -E ' pool (s5i|htp) ' "$CHUTE_LOG" | tail -n 2 | cut -c25- | tr '\n' ';')"
say "idle closes: s5i $(grep -c '^idle-close' "$NETNS_TMP/peer-s5i.log"), htp $(grep -c '^idle-close' "$NETNS_TMP/peer-htp.log")"
assert_ge 2 "$(grep -c '^idle-close' "$NETNS_TMP/peer-s5i.log")" "s5i's server closed idle connections"
assert_ge 2 "$(grep -c '^idle-close' "$NETNS_TMP/peer-htp.log")" "htp's server closed idle connections"
assert_ge $((I0_discarded_dead + 2)) "$I_discarded_dead" "s5i: discarded_dead moved"
assert_ge $((H0_discarded_dead + 2)) "$H_discarded_dead" "htp: discarded_dead moved"
assert_ge $((I0_warm + 3)) "$I_warm" "s5i: warm hand-outs"
assert_ge $((H0_warm + 3)) "$H_warm" "htp: warm hand-outs"
assert_ge 1 "$H_resumed" "htp: refills that resumed the TLS session"

check "200 parallel new flows open at most 200 + max_idle ($MAX_IDLE) connections at the server"
sleep 1
a0=$(peer_accepts s5i)
out=$(cli_py "$SRV6" "$HTTP_PORT" <<'PY'
import socket, sys, threading
host, port, n = sys.argv[1], int(sys.argv[2]), 200
go, ok, lock = threading.Barrier(n), [0], threading.Lock()
def one():
    go.wait()
    try:
        s = socket.create_connection((host, port), timeout=20)
        s.sendall(b"GET /small HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        b = b""
        while True:
            d = s.recv(4096)
            if not d:
                break
            b += d
        if b.startswith(b"HTTP/1.1 200") and b.endswith(b"hello from the tun e2e server\n"):
            with lock:
                ok[0] += 1
    except OSError:
        pass
ts = [threading.Thread(target=one) for _ in range(n)]
for t in ts: t.start()
for t in ts: t.join()
print(f"ok={ok[0]}")
PY
)
sleep 2
a1=$(peer_accepts s5i)
stats_read
pool_read s5i B
say "200 parallel: $out; server-side connections $((a1 - a0)); $(grep -E ' pool s5i ' "$CHUTE_LOG" | tail -n 1 | cut -c25-)"
assert_eq "ok=200" "$out" "every parallel flow got its answer"
lt $((a1 - a0)) $((200 + MAX_IDLE + 1)) || fail "200 parallel flows opened $((a1 - a0)) connections (> 200 + $MAX_IDLE)"
assert_ge 200 $((a1 - a0 + I_idle)) "the server's count sees the flows' connections"
assert_decided_once
chute_alive
pass
