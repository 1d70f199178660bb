#!/usr/bin/env bash
# A running engine against hostile bundles given by SIGHUP (issue 19): one
# over its memory cap after main.lua, one whose main.lua is a FIFO, one
# with a looping __gc finalizer, and a route() at its memory cap. Each
# reload fails with a message and the running bundle keeps serving; the
# engine is never aborted nor blocked.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start
bundle_write <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
chute_start
SOCKS="socks5h://127.0.0.1:$SOCKS_PORT"
served() { # served WHAT: a download through the running bundle still works
    assert_eq 0 "$(curl_rc -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")" "$1"
}
served "the first bundle serves"

say "a bundle over lua_memory_mb after main.lua, then SIGHUP"
bundle_write "lua_memory_mb = 4," <<'LUA'
local hold = {}
for i = 1, 300000 do hold[i] = {} end
function chute.route(flow) return hold and "REJECT" end
LUA
kill -HUP "$CHUTE_PID"
assert_log " error reload failed, keeping the running bundle: .*main\.lua: the bundle holds [0-9.]+ MiB after loading, over lua_memory_mb = 4" \
    "reload refused with the bundle's size"
kill -0 "$CHUTE_PID" || fail "chute died on the over-cap reload"
served "the running bundle still serves"

say "main.lua replaced by a FIFO, then SIGHUP"
rm "$BUNDLE/main.lua"
mkfifo "$BUNDLE/main.lua"
kill -HUP "$CHUTE_PID"
assert_log " error reload failed, keeping the running bundle: .*main\.lua: not a regular file" \
    "reload refused: not a regular file"
served "the loop is not blocked in open()"
rm "$BUNDLE/main.lua"

say "a looping __gc finalizer, then SIGHUP"
bundle_write <<'LUA'
setmetatable({}, { __gc = function() while true do end end })
function chute.route(flow) return "REJECT" end
LUA
kill -HUP "$CHUTE_PID"
assert_log " error reload failed, keeping the running bundle: .*__gc is not allowed in bundles" \
    "reload refused: __gc"
served "the running bundle still serves"

say "a route() that fills its memory cap and keeps it, then more flows"
bundle_write "lua_memory_mb = 4," <<'LUA'
local head
function chute.route(flow)
  pcall(function() while true do head = { head } end end)
  return "DIRECT"
end
LUA
kill -HUP "$CHUTE_PID"
assert_log " info  reloaded " "the capped bundle loaded"
for i in 1 2 3; do served "flow $i at the cap is served (fallback DIRECT)"; done
kill -0 "$CHUTE_PID" || fail "chute died at the memory cap"

chute_stop_within 2
e2e_pass
