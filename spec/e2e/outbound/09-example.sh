#!/usr/bin/env bash
# examples/proxy as it ships, with only its ports, the health-check URL
# (a local nginx instead of a public one) and one PROXIED entry
# (127.0.0.1, the origin) changed for the run; no root. Its Shadowsocks
# server is absent, so the fallback group goes DIRECT: fetches through
# chute's SOCKS5 and HTTP listeners come back exact with policy=proxied
# via=DIRECT; then an ss-server appears on the example's port and the group
# moves to it. `chute route` shows the example's own names take the group.
. "$(dirname "$0")/../lib.sh"
e2e_init
origin_start

EX=$CHUTE_TOP/examples/proxy
[ -f "$EX/main.lua" ] || fail "no examples/proxy/main.lua"

check "chute check and chute route on the example as shipped"
"$CHUTE" check "$EX" >/dev/null 2>&1 || fail "chute check examples/proxy: $("$CHUTE" check "$EX" 2>&1)"
assert_match "^proxied" "$("$CHUTE" route "$EX" www.example.com:443 2>&1)" "www.example.com takes the group"
assert_match "^DIRECT" "$("$CHUTE" route "$EX" example.net:443 2>&1)" "example.net goes DIRECT"

SS_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed -e "s/127\.0\.0\.1:1080/127.0.0.1:$SOCKS_PORT/" \
    -e "s/127\.0\.0\.1:8080/127.0.0.1:$HTTP_PORT/" \
    -e "s/port = 8388,/port = $SS_PORT,/" \
    -e "s|http://www\.gstatic\.com/generate_204|http://127.0.0.1:$ORIGIN_PORT/small|" \
    -e "s/interval = 60,/interval = 1,/" \
    -e 's/^  "example\.com",$/  "example.com", "127.0.0.1",/' \
    "$EX/main.lua" >"$BUNDLE/main.lua"
for want in "127.0.0.1:$SOCKS_PORT" "127.0.0.1:$HTTP_PORT" "port = $SS_PORT," \
    "127.0.0.1:$ORIGIN_PORT/small" "interval = 1," '"127.0.0.1",'; do
    grep -q -F -- "$want" "$BUNDLE/main.lua" || fail "the example changed: could not set '$want' in it"
done
chute_start

# groups_line: SIGUSR1, then the newest "groups" line.
groups_line() {
    local n
    n=$(grep -c ' info  groups ' "$CHUTE_LOG" || true)
    kill -USR1 "$CHUTE_PID"
    for _ in $(seq 50); do
        [ "$(grep -c ' info  groups ' "$CHUTE_LOG" || true)" -gt "$n" ] && break
        sleep 0.05
    done
    grep ' info  groups ' "$CHUTE_LOG" | tail -n 1 | sed 's/.* info  groups //'
}
wait_groups() {
    local line
    for _ in $(seq $(($2 * 4))); do
        line=$(groups_line)
        grep -q -E -- "$1" <<<"$line" && return 0
        sleep 0.25
    done
    fail "the group is not /$1/ after $2 s: $line"
}

check "without its Shadowsocks server the group is DIRECT"
wait_groups "^proxied=fallback:DIRECT ss=down DIRECT=[0-9]+ms" 5
assert_eq "$SHA_1M" "$(fetch_sha --socks5 "127.0.0.1:$SOCKS_PORT" "http://127.0.0.1:$ORIGIN_PORT/1m.bin")" "1m.bin through the SOCKS5 listener"
assert_eq "$SHA_SMALL" "$(fetch_sha -x "http://127.0.0.1:$HTTP_PORT" "http://127.0.0.1:$ORIGIN_PORT/small")" "small through the HTTP listener"
assert_log "tcp socks .* -> 127\.0\.0\.1:$ORIGIN_PORT policy=proxied via=DIRECT .*close=done" "the SOCKS5 flow: policy=proxied via=DIRECT"
assert_log "tcp http .* -> 127\.0\.0\.1:$ORIGIN_PORT policy=proxied via=DIRECT .*close=done" "the HTTP flow: policy=proxied via=DIRECT"
if have_ipv6_loopback; then
    assert_eq "$SHA_SMALL" "$(fetch_sha --socks5 "127.0.0.1:$SOCKS_PORT" "http://[::1]:$ORIGIN_PORT/small")" "[::1] (not listed)"
    assert_log "-> \[::1\]:$ORIGIN_PORT policy=DIRECT " "an unlisted destination goes DIRECT"
fi

if command -v ss-server >/dev/null 2>&1; then
    check "the example's ss-server appears: the group moves to it"
    ss-server -s 127.0.0.1 -p "$SS_PORT" -m aes-128-gcm -k example-password -u >"$E2E_TMP/ss.log" 2>&1 &
    E2E_EXTRA_PIDS+=($!)
    wait_port 127.0.0.1 "$SS_PORT" 10 || fail "ss-server did not start"
    wait_groups "^proxied=fallback:ss ss=[0-9]+ms" 8
    assert_eq "$SHA_1M" "$(fetch_sha --socks5 "127.0.0.1:$SOCKS_PORT" "http://127.0.0.1:$ORIGIN_PORT/1m.bin")" "1m.bin through the group, now via ss"
    assert_log "tcp socks .* -> 127\.0\.0\.1:$ORIGIN_PORT policy=proxied via=ss .*close=done" "the flow line: policy=proxied via=ss"
else
    say "no ss-server: the switch to the proxy is not tested"
fi
e2e_pass
