#!/usr/bin/env bash
# The built-in dashboard in a real browser: Debian's Chromium driven by
# playwright-core (spec/e2e/control/browser, pinned in its lockfile;
# scripts/bootstrap installs it) loads /ui/, sees the flow of a download
# running through chute, selects a group member by clicking, closes the
# flow by clicking (the download ends), and saves a screenshot beside the
# binary (artifacts/control-dashboard.png).
. "$(dirname "$0")/ctllib.bash"
BROWSER_DIR=$(cd "$(dirname "$0")/browser" && pwd)

need_cmd node chromium
if [ ! -d "$BROWSER_DIR/node_modules/playwright-core" ]; then
    msg="no playwright-core in $BROWSER_DIR/node_modules: scripts/bootstrap runs npm ci there"
    [ "${CI:-}" = true ] && fail "$msg"
    skip "$msg"
fi
ctl_init --big
ctl_bundle <<'LUA'
chute.group "pick" { type = "select", proxies = { "DIRECT", "REJECT" } }
function chute.route(flow) return "pick" end
LUA
ctl_start

slow_download a 2M
wait_flows 1
ART=$(dirname "$CHUTE")/artifacts
mkdir -p "$ART"
say "Chromium drives the dashboard"
out=$(cd "$BROWSER_DIR" && timeout 90 node dashboard.mjs "$API" "$SECRET" "localhost:$ORIGIN_PORT" pick REJECT \
    "$ART/control-dashboard.png" 2>"$E2E_TMP/browser.err") || fail "the browser run failed: $(tail -n 20 "$E2E_TMP/browser.err")"
say "browser: $out"
assert_match '"version":"chute ' "$out" "the page connected and shows the version"
assert_match '"rate":"↑ ' "$out" "the traffic chart got /traffic over WebSocket"
assert_match '"selected":"REJECT"' "$out" "clicking REJECT in the group selected it"
assert_match '"errors":\[\]' "$out" "no script error on the page"
id=$(sed -E 's/.*"closed":"([0-9]+)".*/\1/' <<<"$out")
assert_eq REJECT "$(api "$API/proxies/pick" | json 'j["now"]')" "the API agrees: pick now REJECT"
assert_log "flow $id tcp socks .*close=closed by control" "the clicked flow was closed"
for _ in $(seq 50); do [ -f "$E2E_TMP/a.rc" ] && break; sleep 0.1; done
check "the download through it ended early"
[ -f "$E2E_TMP/a.rc" ] && [ "$(cat "$E2E_TMP/a.rc")" != 0 ] || fail "the download did not end with an error"
check "the screenshot was saved"
[ -s "$ART/control-dashboard.png" ] || fail "no screenshot at $ART/control-dashboard.png"
assert_eq 97 "$(curl_rc -x "socks5h://127.0.0.1:$SOCKS_PORT" "http://localhost:$ORIGIN_PORT/small")" "the next flow takes REJECT"
e2e_pass
