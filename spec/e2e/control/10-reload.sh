#!/usr/bin/env bash
# A reload applies a changed control = {...}: a new secret holds from the
# next request and closes the clients let in with the old one (a /traffic
# stream ends); a new listen address is taken before the old one closes;
# an address that cannot be bound leaves the API where it was (logged); a
# bundle without control = {...} closes the API, and one with it again
# opens it. The reload itself may come from the API (PUT /configs).
. "$(dirname "$0")/ctllib.bash"

ctl_init
P2=$(e2e_ports 1) || fail "e2e_ports: no second port"
ROUTE='function chute.route(flow) return "DIRECT" end'
ctl_bundle <<<"$ROUTE"
ctl_start

say "a /traffic stream let in with the old secret"
curl -s -N --max-time 30 -H "Authorization: Bearer $SECRET" "$API/traffic" >"$E2E_TMP/stream" &
STREAM=$!
E2E_EXTRA_PIDS+=("$STREAM")
sleep 1.2
[ -s "$E2E_TMP/stream" ] || fail "the /traffic stream got nothing"

say "new secret, same address, reloaded through PUT /configs"
OLD=$SECRET SECRET=n3w-secret
ctl_bundle <<<"$ROUTE"
assert_eq 204 "$(http_status -H "Authorization: Bearer $OLD" -X PUT -d '{}' "$API/configs")" "PUT /configs with the old secret: 204"
wait_log_count " info  reloaded " 1 >/dev/null
assert_log "control: a new secret" "the reload says the secret changed"
assert_eq 401 "$(http_status -H "Authorization: Bearer $OLD" "$API/version")" "the old secret: 401"
assert_eq 200 "$(http_status -H "Authorization: Bearer $SECRET" "$API/version")" "the new secret: 200"
for _ in $(seq 30); do kill -0 "$STREAM" 2>/dev/null || break; sleep 0.1; done
check "the stream opened with the old secret was closed"
! kill -0 "$STREAM" 2>/dev/null || fail "the /traffic stream from before the new secret still runs"

say "a new address: taken, the old one closed"
sed -i "s/127.0.0.1:$CTL_PORT/127.0.0.1:$P2/" "$BUNDLE/main.lua"
kill -HUP "$CHUTE_PID"
wait_log "control: listening on http://127.0.0.1:$P2 now" || fail "no log line: control: listening on http://127.0.0.1:$P2 now"
assert_eq 200 "$(http_status -H "Authorization: Bearer $SECRET" "http://127.0.0.1:$P2/version")" "the new address answers"
assert_eq 000 "$(http_status "$API/version")" "the old address is closed"

say "an address in use: the API stays where it is"
sed -i "s/127.0.0.1:$P2/127.0.0.1:$SOCKS_PORT/" "$BUNDLE/main.lua"
kill -HUP "$CHUTE_PID"
wait_log "control: listen on 127.0.0.1:$SOCKS_PORT: Address already in use" || fail "no log line: control: listen on 127.0.0.1:$SOCKS_PORT: Address already in use"
assert_log "the control API stays on its old address" "logged, with what happens"
assert_eq 200 "$(http_status -H "Authorization: Bearer $SECRET" "http://127.0.0.1:$P2/version")" "still on the address before"

say "no control = {...}: closed; back: open again"
bundle_write <<<"$ROUTE"
kill -HUP "$CHUTE_PID"
wait_log "control: the bundle has no control" || fail "no log line: control: the bundle has no control"
assert_eq 000 "$(http_status "http://127.0.0.1:$P2/version")" "closed with control = {...} gone"
ctl_bundle <<<"$ROUTE"
kill -HUP "$CHUTE_PID"
wait_port 127.0.0.1 "$CTL_PORT" 10 || fail "control = {...} back: not listening again"
assert_eq 200 "$(http_status -H "Authorization: Bearer $SECRET" "$API/version")" "and it answers"
chute_alive
e2e_pass
