#!/usr/bin/env bash
# route() that raises an error, or returns a policy name that does not
# exist: the flow takes the fallback (DIRECT) and still works, and the log
# says why, with the script's file:line.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start --big
# By destination: the name "localhost" raises, the address 127.0.0.1 gets
# an unknown policy, [::1] is routed normally (the control).
bundle_write <<'LUA'
function chute.route(flow)
  if flow.host == "localhost" then
    error("no rule for " .. flow.host)
  end
  if flow.dst_ip == "127.0.0.1" then
    return "NOPE"
  end
  return "DIRECT"
end
LUA
chute_start
ERR_LINE=$(line_of 'error("no rule for')
FN_LINE=$(line_of 'function chute.route')
NOPE_LINE=$(line_of 'return "NOPE"')
SOCKS="127.0.0.1:$SOCKS_PORT"

say "route() raises for localhost: 100 MiB still arrive through the fallback"
got=$(fetch_sha -x "socks5h://$SOCKS" "http://localhost:$ORIGIN_PORT/big.bin")
assert_eq "$SHA_BIG" "$got" "sha256 through the fallback equals the file's"
assert_log " warn  .*route\(\) failed: .*main\.lua:$ERR_LINE: no rule for localhost" \
    "warn line with main.lua:$ERR_LINE and the error message"
assert_log "tcp socks .* -> localhost:$ORIGIN_PORT policy=DIRECT rule=\"fallback: error\"" \
    "flow line: policy=DIRECT rule=\"fallback: error\""
down=$(flow_field "$(flow_line "-> localhost:$ORIGIN_PORT ")" down)
assert_ge 104857600 "$down" "that flow moved >= 100 MiB down (got $down)"

say "route() returns \"NOPE\" for 127.0.0.1: fallback, and the log names NOPE"
got=$(fetch_sha -x "socks5://$SOCKS" "http://127.0.0.1:$ORIGIN_PORT/small")
assert_eq "$SHA_SMALL" "$got" "the file arrives through the fallback"
# The line is route()'s (where it is defined or the return statement).
assert_log " warn  .*main\.lua:($FN_LINE|$NOPE_LINE):.*'NOPE'" \
    "warn line naming 'NOPE' with main.lua:$FN_LINE or :$NOPE_LINE"
assert_log "tcp socks .* -> 127\.0\.0\.1:$ORIGIN_PORT policy=DIRECT rule=\"fallback: unknown policy\"" \
    "flow line: policy=DIRECT rule=\"fallback: unknown policy\""

say "the same script's normal path is untouched"
if have_ipv6_loopback; then
    got=$(fetch_sha -x "socks5://$SOCKS" "http://[::1]:$ORIGIN_PORT/small")
    assert_eq "$SHA_SMALL" "$got" "[::1] gets the file"
    assert_log "tcp socks .* -> \[::1\]:$ORIGIN_PORT policy=DIRECT rule=\"route\"" \
        "flow line for [::1]: rule=\"route\""
fi
assert_eq 2 "$(log_count ' warn ')" "exactly two warn lines (one per failing call)"

say "the same through the HTTP proxy"
got=$(fetch_sha -x "http://127.0.0.1:$HTTP_PORT" "http://localhost:$ORIGIN_PORT/small")
assert_eq "$SHA_SMALL" "$got" "localhost via the HTTP proxy arrives through the fallback"
assert_log "tcp http .* -> localhost:$ORIGIN_PORT policy=DIRECT rule=\"fallback: error\"" \
    "flow line: http inbound, rule=\"fallback: error\""

e2e_pass
