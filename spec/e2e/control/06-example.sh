#!/usr/bin/env bash
# examples/control as it ships, with only its two ports changed for the
# run: the API answers with the example's secret, the dashboard loads,
# a flow through the SOCKS5 listener is listed and `chute ctl select`
# switches the example's group.
. "$(dirname "$0")/ctllib.bash"
ctl_init --big
EX=$CHUTE_TOP/examples/control
"$CHUTE" check "$EX" >/dev/null 2>&1 || fail "chute check examples/control: $("$CHUTE" check "$EX" 2>&1)"
SECRET=change-me
sed -e "s/127\.0\.0\.1:1080/127.0.0.1:$SOCKS_PORT/" -e "s/127\.0\.0\.1:9090/127.0.0.1:$CTL_PORT/" \
    "$EX/main.lua" >"$BUNDLE/main.lua"
for want in "127.0.0.1:$SOCKS_PORT" "127.0.0.1:$CTL_PORT" 'secret = "change-me"'; do
    grep -q -F -- "$want" "$BUNDLE/main.lua" || fail "the example changed: no '$want' in it"
done
"$CHUTE" run "$BUNDLE" 2>"$E2E_TMP/chute.log" &
CHUTE_PID=$!
CHUTE_LOG=$E2E_TMP/chute.log
wait_port 127.0.0.1 "$CTL_PORT" 10 || fail "the example's control API does not accept"
wait_port 127.0.0.1 "$SOCKS_PORT" 10 || fail "the example's SOCKS5 listener does not accept"
assert_match '<title>chute</title>' "$(curl -s "$API/ui/")" "the dashboard page loads"
assert_eq 401 "$(http_status "$API/proxies")" "the API wants the example's secret"
assert_eq Selector "$(api "$API/proxies/out" | json 'j["type"]')" "the example's group is a selector"
slow_download a 2M
wait_flows 1
assert_eq out "$(api "$API/connections" | json 'j["connections"][0]["chains"][-1]')" "the flow goes through the group"
assert_eq selected "$("$CHUTE" ctl --addr "127.0.0.1:$CTL_PORT" --secret change-me select out REJECT)" "chute ctl select out REJECT"
assert_eq 97 "$(curl_rc -x "socks5h://127.0.0.1:$SOCKS_PORT" "http://localhost:$ORIGIN_PORT/small")" "the next flow is refused"
e2e_pass
