#!/usr/bin/env bash
# SIGHUP reloads the bundle: a flow in flight keeps its decision and its
# bytes, new flows get the new script; a bundle that fails to load leaves
# the running one in place; SIGTERM stops chute with status 0.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start --big
BIG=104857600
bundle_write <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
chute_start
SOCKS="socks5h://127.0.0.1:$SOCKS_PORT"

# 100 MiB at 20 MB/s: about 5 s in flight. (A smaller file at a lower rate
# does not work: curl reads the first ~10 MB, everything the socket buffers
# hold, at once and then pauses, so no bytes would move across the reload.)
say "start a slow 100 MiB download (--limit-rate 20M)"
curl --silent --show-error --fail --max-time 60 --limit-rate 20M -x "$SOCKS" \
    -o "$E2E_TMP/slow.bin" "http://localhost:$ORIGIN_PORT/big.bin" 2>"$E2E_TMP/slow.err" &
slow=$!
sleep 1.5

say "rewrite main.lua to REJECT everything, then SIGHUP"
bundle_write <<'LUA'
function chute.route(flow)
  return "REJECT"
end
LUA
kill -HUP "$CHUTE_PID"
assert_log " info  reloaded " "log says reloaded"
size=$(stat -c %s "$E2E_TMP/slow.bin")
check "the download is still in flight after the reload (${size} of $BIG bytes)"
kill -0 "$slow" 2>/dev/null && [ "$size" -lt "$BIG" ] || fail "the download ended before the reload"

say "a new request gets the new script"
assert_eq 97 "$(curl_rc -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")" \
    "new SOCKS5 request rejected (curl exit 97)"
assert_log "tcp socks .* -> localhost:$ORIGIN_PORT policy=REJECT rule=\"route\"" "flow line: policy=REJECT"

say "the in-flight download completes with the old decision"
rc=0
wait "$slow" || rc=$?
check "the slow curl exits 0"
[ "$rc" -eq 0 ] || { cat "$E2E_TMP/slow.err" >&2; fail "the in-flight download failed (curl exit $rc)"; }
assert_eq "$SHA_BIG" "$(sha_file "$E2E_TMP/slow.bin")" "sha256 of the in-flight download"
line=$(flow_line "-> localhost:$ORIGIN_PORT policy=DIRECT")
assert_match 'close=done' "$line" "its flow line: DIRECT, closed normally"
assert_ge "$BIG" "$(flow_field "$line" down)" "its flow carried the whole file"

say "a bundle with a syntax error, then SIGHUP"
bundle_write <<'LUA'
function chute.route(flow)
  return "DIRECT"
end end
LUA
BAD_LINE=$(line_of 'end end')
kill -HUP "$CHUTE_PID"
assert_log " error reload failed, keeping the running bundle: .*main\.lua:$BAD_LINE:" \
    "log says reload failed, with main.lua:$BAD_LINE"
assert_eq 1 "$(log_count ' reloaded ')" "only the first reload took effect"
assert_eq 97 "$(curl_rc -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")" \
    "the REJECT bundle still applies (curl exit 97)"
assert_eq 2 "$(wait_log_count 'policy=REJECT' 2)" "two REJECT flow lines"

say "SIGTERM"
chute_stop_within 2
e2e_pass
