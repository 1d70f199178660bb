#!/usr/bin/env bash
# The connection pool (core/pool) through the TUN against Debian's trojan
# server, 50 ms away: the proxy is reached over a second link that holds
# frames from the server back 50 ms (delay_link_start in outlib.bash: tc
# netem's delay, which this kernel lacks), so one round trip costs 50 ms. Two proxies to the same server: "tjp"
# (pool on, the default for TLS-based proxies) and "tjc" (pool = false).
# Short sequential fetches alternate between them: with the pool warm the
# time to first byte of a new flow is lower by at least about one round
# trip (no TCP handshake, no TLS handshake on the flow's path), and the
# pool's counters show warm hand-outs and resumed sessions. Then the
# server restarts while connections sit idle in the pool: the pool
# notices they are dead and discards them (none handed out, none retried)
# and the next flow still succeeds. Last, Shadowsocks with pool = {}
# ("ssp"; off by default for proxies without TLS) is handed warm
# connections too. (ss-server's -t does not close a connection that has
# sent nothing yet, so it cannot play a server closing idle connections:
# 12-pool-peers.sh does that with proxypeer.py.)
. "$(dirname "$0")/outlib.bash"
need_root
need_cmd trojan openssl ss-server
netns_setup
servers_start http
delay_link_start 0 50
trojan_start 4443 pool-pw "$DL_SRV4"
bg_in "$NS_SRV" "$NETNS_TMP/ss.log" ss-server -s "$DL_SRV4" -p 8388 -k pool-pw -m aes-128-gcm -t 60
wait_tcp "$NS_SRV" "$DL_SRV4" 8388 10 || fail "ss-server did not start"
N=${POOL_FETCHES:-12}
RTT=0.050

# bundle TJX_MAX_IDLE: tjp pooled, tjc not, tjx pooled with TJX_MAX_IDLE
# (a reload that changes it makes tjx another proxy).
bundle() {
    tun_bundle <<LUA
local tj = { type = "trojan", server = "$DL_SRV4", port = 4443, password = "pool-pw",
             sni = "trojan.test", skip_cert_verify = true }
local function with(extra)
  local c = {}
  for k, v in pairs(tj) do c[k] = v end
  for k, v in pairs(extra) do c[k] = v end
  return c
end
chute.proxy "tjp" (with { pool = { max_idle = 4, idle_timeout = 60 } })
chute.proxy "tjc" (with { pool = false })
chute.proxy "tjx" (with { pool = { max_idle = $1 } })
chute.proxy "ssp" { type = "shadowsocks", server = "$DL_SRV4", port = 8388, password = "pool-pw",
                    cipher = "aes-128-gcm", pool = {} }
function chute.route(flow)
  if flow.dst_ip == "$SRV6" then return flow.dst_port == $ALT_PORT and "ssp" or "tjx" end
  if flow.dst_port == $ALT_PORT then return "tjc" end
  return "tjp"
end
LUA
}
bundle 4
tun_chute_start

ttfb() {
    cli_curl -o /dev/null -w '%{time_starttransfer}\n' -H "Connection: close" --max-time 10 \
        "http://$SRV4:$1/small" || fail "a fetch through port $1 failed"
}

check "a first fetch through each proxy (cold; the TLS session gets cached)"
ttfb "$HTTP_PORT" >/dev/null
ttfb "$ALT_PORT" >/dev/null
sleep 0.5

check "$N sequential fetches through each, alternating: time to first byte"
on=() off=()
for _ in $(seq "$N"); do
    on+=("$(ttfb "$HTTP_PORT")")
    off+=("$(ttfb "$ALT_PORT")")
    sleep 0.2 # the refill behind a hand-out: a TCP and a TLS round trip
done
m_on=$(printf '%s\n' "${on[@]}" | median)
m_off=$(printf '%s\n' "${off[@]}" | median)
ratio=$(awk -v a="$m_on" -v b="$m_off" 'BEGIN { printf "%.2f", a / b }')
say "median time to first byte: pool on ${m_on}s, pool off ${m_off}s (ratio $ratio; RTT ${RTT}s)"
say "pool on:  ${on[*]}"
say "pool off: ${off[*]}"
lt "$(awk -v a="$m_on" -v r="$RTT" 'BEGIN { print a + 0.8 * r }')" "$m_off" ||
    fail "the pool saves less than 0.8 round trips: on ${m_on}s, off ${m_off}s"
lt "$ratio" 0.75 || fail "time to first byte with the pool is $ratio of without (want < 0.75)"

check "the counters: warm hand-outs, resumed sessions; no pool for tjc"
stats_read
pool_read tjp P
say "$(grep -E ' pool tjp ' "$CHUTE_LOG" | tail -n 1 | cut -c25-)"
assert_ge $((N - 1)) "$P_warm" "tjp: warm hand-outs"
assert_ge 1 "$P_resumed" "tjp: refills that resumed the TLS session"
assert_eq 0 "$P_retried" "tjp: retried hand-outs"
[ "$(grep -c -E ' pool tjc ' "$CHUTE_LOG")" = 0 ] || fail "tjc (pool = false) has a pool"
assert_log "tcp tun .* -> $SRV4:$HTTP_PORT policy=tjp .*close=done" "a tjp flow line"

check "a reload keeps the pool of an unchanged proxy, drops a changed one's"
fetch6() {
    assert_eq "$SHA_SMALL" "$(cli_fetch_sha -H "Connection: close" --max-time 10 "http://[$SRV6]:$HTTP_PORT/small")" "a fetch through tjx"
}
fetch6
sleep 0.3
fetch6
bundle 3
kill -HUP "$CHUTE_PID"
wait_log "reloaded .*rule version 2" || fail "chute did not reload"
fetch6
stats_read
pool_read tjp H
pool_read tjx X
say "after the reload: $(grep -E ' pool tjp ' "$CHUTE_LOG" | tail -n 1 | cut -c31-)"
say "after the reload: $(grep -E ' pool tjx ' "$CHUTE_LOG" | tail -n 1 | cut -c31-)"
assert_eq "$P_warm" "$H_warm" "tjp's warm count after the reload (the same pool)"
assert_eq "$P_idle" "$H_idle" "tjp's idle connections after the reload"
assert_eq "1 0" "$X_cold $X_warm" "tjx's cold and warm counts (a new pool: it changed)"
P_discarded_dead=$H_discarded_dead P_idle=$H_idle P_retried=$H_retried

check "a server restart kills the idle connections: discarded, not handed out"
assert_ge 1 "$P_idle" "idle connections held before the restart"
kill_wait "$TROJAN_PID" || true
trojan_start 4443 pool-pw "$DL_SRV4"
t0=$(now)
while :; do
    stats_read
    pool_read tjp R
    [ "$R_discarded_dead" -ge $((P_discarded_dead + P_idle)) ] && break
    lt "$(elapsed "$t0")" 5 || break
    sleep 0.1
done
say "discarded_dead $P_discarded_dead -> $R_discarded_dead (idle before: $P_idle)"
assert_ge $((P_discarded_dead + P_idle)) "$R_discarded_dead" "dead idle connections discarded"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha -H "Connection: close" --max-time 10 "http://$SRV4:$HTTP_PORT/small")" "a fetch through tjp after the restart"
stats_read
pool_read tjp A
assert_eq "$P_retried" "$A_retried" "hand-outs retried (a dead one handed out)"
check "shadowsocks through its pool"
fetch_ss() {
    assert_eq "$SHA_SMALL" "$(cli_fetch_sha -H "Connection: close" --max-time 10 "http://[$SRV6]:$ALT_PORT/small")" "a fetch through ssp"
}
fetch_ss
sleep 0.5
fetch_ss
stats_read
pool_read ssp Q
say "$(grep -E ' pool ssp ' "$CHUTE_LOG" | tail -n 1 | cut -c31-)"
assert_ge 1 "$Q_warm" "ssp: warm hand-outs"
assert_eq 0 "$Q_retried" "ssp: retried hand-outs"
assert_decided_once
chute_alive
pass
