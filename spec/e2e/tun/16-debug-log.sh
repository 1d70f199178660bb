#!/usr/bin/env bash
# `chute run --log-level debug` says what happened, a line per step:
#   a TUN flow's decision (route(), then the decision cache for the next),
#   a sniffed host, a proxied flow's handshake with its times, a DNS
#   query's answer and a DIRECT connect's lookup, and a reload's diff of
#   the proxies and groups.
# At info none of these lines appear.
. "$(dirname "$0")/../outbound/outlib.bash"
# shellcheck disable=SC2034 # read by lib.sh
TEST_NAME=tun/16-debug-log
need_root
need_cmd ss-server
need_cmd dig
netns_setup
servers_start http dns

ss_start 8501 aes-256-gcm "pw"
write_bundle() {
    tun_bundle "  dns = { upstream = { \"$SRV4\" }, persist = false }," <<LUA
chute.proxy "ss" { type = "shadowsocks", server = "$SRV4", port = 8501, cipher = "aes-256-gcm", password = "pw" }
$1
function chute.route(flow)
  if flow.dst_port == $ALT_PORT then return "ss" end
  if flow.dst_port == 8082 and flow.host == "sniff.test" then return "DIRECT" end
  return "DIRECT"
end
LUA
}
write_bundle ""
CHUTE_RUN_ARGS="--log-level debug" tun_chute_start
SRC="198\.19\.0\.1:[0-9]+"

check "a TUN flow: route()'s decision, then the decision cache's"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 5 "http://$SRV4:$HTTP_PORT/small")" "the first fetch"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 5 "http://$SRV4:$HTTP_PORT/small")" "the second fetch"
assert_log "debug flow 1: tcp tun $SRC -> $SRV4:$HTTP_PORT: policy=DIRECT rule=\"route\"$" "the first flow's decision"
assert_log "debug flow 2: decision cache hit \(entry [0-9]+ of [0-9]+\): route\(\) not called$" "the cache hit"
assert_log "debug flow 2: tcp tun $SRC -> $SRV4:$HTTP_PORT: policy=DIRECT rule=\"route \(cached\)\"$" "the second flow's decision"

check "a sniffed host"
ip netns exec "$NS_CLI" curl -s -o /dev/null --max-time 3 -H "Host: sniff.test" "http://$SRV4:8082/" || true
assert_log "debug flow [0-9]+: sniffed host 'sniff\.test' from the first [0-9]+ bytes$" "the sniff's outcome"
assert_log "debug flow [0-9]+: tcp tun $SRC -> $SRV4:8082 host=sniff\.test: policy=DIRECT" "the decision with the host"

check "a proxied flow: the proxy's handshake, timed"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 5 "http://$SRV4:$ALT_PORT/small")" "the fetch through ss"
assert_log "debug proxy 'ss' \(shadowsocks\) to $SRV4:$ALT_PORT: ready \(the request rides the first bytes\) after [0-9]+ ms \(its server up in [0-9]+ ms\)$" "the proxy's handshake line"

check "a DNS query and its answer"
ip=$(cli dig @"$SRV4" test.example A +short "${DIG_WAIT[@]}" 2>&1)
say "test.example A -> $ip"
assert_log "debug dns: test\.example A: fake-ip NOERROR A $ip$" "the answer line"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 5 "http://$ip:$HTTP_PORT/small")" "a fetch by the fake IP"
assert_log "debug flow [0-9]+: tcp tun $SRC -> test\.example:$HTTP_PORT: policy=DIRECT" "its decision names the host"
assert_log "debug dns: test\.example resolved in [0-9]+ ms: 1 address, first $SRV4$" "the DIRECT connect's lookup"

check "a reload's diff"
write_bundle 'chute.proxy "jp" { type = "socks5", server = "'"$SRV4"'", port = 1080 }
chute.group "auto" { type = "fallback", proxies = { "jp", "ss" } }'
kill -HUP "$CHUTE_PID"
wait_log "reload: proxies \+jp; groups \+auto$" 5 || fail "no reload diff: $(grep reload "$CHUTE_LOG" | tail -n 2)"

check "at info, none of it"
chute_stop_within 5
CHUTE_RUN_ARGS="" tun_chute_start
assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 5 "http://$SRV4:$ALT_PORT/small")" "a fetch through ss"
cli dig @"$SRV4" test.example A +short "${DIG_WAIT[@]}" >/dev/null 2>&1
assert_no_log " debug " "no debug line"
chute_alive
pass
