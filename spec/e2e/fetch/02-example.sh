#!/usr/bin/env bash
# examples/remote as it ships: it checks, routes and runs with nothing
# fetched (an offline first start: the lists are empty, the group has
# DIRECT), and its fetches fail in the background without harm. Then the
# same bundle with its two URLs pointed at a local nginx: the rule list
# and the subscription arrive, and the list rejects what it names.
. "$(dirname "$0")/../lib.sh"
e2e_init
origin_start
export CHUTE_STATE_DIR=$E2E_TMP/state

EX=$CHUTE_TOP/examples/remote
[ -f "$EX/main.lua" ] || fail "no examples/remote/main.lua"

check "chute check and chute route on the example as shipped, with no caches"
"$CHUTE" check "$EX" >/dev/null 2>&1 || fail "chute check examples/remote: $("$CHUTE" check "$EX" 2>&1)"
assert_match "^proxy	route" "$("$CHUTE" route "$EX" ads.example.org:443 2>/dev/null)" "everything takes the group"

sed -e "s/127\.0\.0\.1:1080/127.0.0.1:$SOCKS_PORT/" -e "s/127\.0\.0\.1:8080/127.0.0.1:$HTTP_PORT/" \
    "$EX/main.lua" >"$BUNDLE/main.lua"
grep -q -F "127.0.0.1:$SOCKS_PORT" "$BUNDLE/main.lua" || fail "the example changed: no SOCKS5 address to set"
chute_start
assert_log "provider sub: no cache yet" "the provider says it has no cache yet"
assert_log "ruleset rules/ads.list: no cache yet" "the rule set too"
assert_eq "$SHA_SMALL" "$(fetch_sha -x "socks5h://127.0.0.1:$SOCKS_PORT" "http://127.0.0.1:$ORIGIN_PORT/small")" "a GET through the group (DIRECT)"
assert_log "ruleset rules/ads.list: fetching https://rules.example.com/ads.list failed" "the offline fetch fails, logged" 35
chute_stop_within 5

check "the example pointed at a local nginx: the list and the subscription arrive"
printf 'DOMAIN-SUFFIX,ads.example.org\n' >"$WWW/ads.list"
printf 'socks5://127.0.0.1:1#hk-one\nsocks5://127.0.0.1:2#other\n' >"$WWW/clash.yaml"
sed -i -e "s|https://sub.example.com/clash.yaml|http://127.0.0.1:$ORIGIN_PORT/clash.yaml|" \
    -e "s|https://rules.example.com/ads.list|http://127.0.0.1:$ORIGIN_PORT/ads.list|" "$BUNDLE/main.lua"
rc=0
out=$("$CHUTE" update "$BUNDLE" 2>/dev/null) || rc=$?
assert_eq 0 "$rc" "chute update: $out"
assert_match "fetched	provider sub	2 proxies \(lines\)" "$out" "the subscription"
assert_match "fetched	ruleset rules/ads.list	1 rules" "$out" "the rule list"
assert_match "^REJECT	route rules/ads.list:1" "$("$CHUTE" route "$BUNDLE" x.ads.example.org:443 2>/dev/null)" "the list rejects"
out=$("$CHUTE" check "$BUNDLE" 2>&1) # whole first: grep -q would cut chute's output (SIGPIPE)
grep -q "provider sub: 1 proxies from its cache (lines), 1 left out by its filter" <<<"$out" ||
    fail "the filter: $out"
e2e_pass
