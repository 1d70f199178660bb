#!/usr/bin/env bash
# A reload storm (issue 19): 100 SIGHUPs 0.1 s apart while 50 downloads
# run, with the bundle broken every other time (a syntax error, a runtime
# error in main.lua). Every download is sha256-equal, chute never stops
# serving, the last good bundle is the one running, and afterwards RSS is
# within 8 MiB and descriptors within 10 of the baseline. ~40 s.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hostile.bash"

e2e_init
origin_start
good() { # good N: a bundle that REJECTs ALT_PORT only when N is "final"
    bundle_write <<LUA
local n = "$1"
function chute.route(flow)
  if n == "final" and flow.dst_port == $ALT_PORT then return "REJECT" end
  return "DIRECT"
end
LUA
}
good 0
chute_start
SOCKS=socks5h://127.0.0.1:$SOCKS_PORT
assert_eq 0 "$(curl_rc -x "$SOCKS" "http://localhost:$ALT_PORT/small")" "the first bundle serves ALT_PORT"
baseline

say "50 downloads of 1 MiB at 80 KB/s each, through SOCKS5 and the HTTP proxy"
dls=()
for i in $(seq 50); do
    via=$SOCKS
    [ $((i % 2)) -eq 0 ] && via=http://127.0.0.1:$HTTP_PORT
    ( rc=0; curl --silent --show-error --fail --max-time 60 --limit-rate 80k -x "$via" \
          -o "$E2E_TMP/dl.$i" "http://localhost:$ORIGIN_PORT/1m.bin" 2>>"$E2E_TMP/dl.err" || rc=$?
      echo "$rc" >"$E2E_TMP/dl.$i.rc" ) &
    dls+=($!)
done
sleep 0.5

say "100 SIGHUPs, 0.1 s apart, the bundle broken every other time"
for i in $(seq 100); do
    case $((i % 4)) in
    1) good "$i" ;;
    2) printf 'local chute = require "chute"\nchute.config {\n' >"$BUNDLE/main.lua.new" && mv "$BUNDLE/main.lua.new" "$BUNDLE/main.lua" ;;
    3) good "$i" ;;
    0) bundle_write <<<'error("broken on purpose")' ;;
    esac
    kill -HUP "$CHUTE_PID" || fail "chute is gone after $i SIGHUPs"
    sleep 0.1
done
good final
kill -HUP "$CHUTE_PID"
for p in "${dls[@]}"; do wait "$p"; done
for i in $(seq 50); do
    [ "$(cat "$E2E_TMP/dl.$i.rc")" = 0 ] || fail "download $i failed (curl $(cat "$E2E_TMP/dl.$i.rc")): $(tail -n 3 "$E2E_TMP/dl.err")"
    [ "$(sha_file "$E2E_TMP/dl.$i")" = "$SHA_1M" ] || fail "download $i is not sha256-equal"
done
check "all 50 downloads finished, sha256-equal"
chute_alive
ok=$(log_count ' info  reloaded ')
bad=$(log_count 'reload failed, keeping the running bundle')
check "reloads: $ok loaded, $bad refused (both > 0)"
[ "$ok" -gt 0 ] && [ "$bad" -gt 0 ] || fail "the storm did not exercise both outcomes"

say "the last good bundle runs"
for _ in $(seq 50); do
    [ "$(curl_rc -x "$SOCKS" "http://localhost:$ALT_PORT/small")" != 0 ] && break
    sleep 0.2
done
check "ALT_PORT is rejected (only the final bundle does that)"
[ "$(curl_rc -x "$SOCKS" "http://localhost:$ALT_PORT/small")" != 0 ] || fail "the final bundle is not running"
assert_eq 0 "$(curl_rc -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")" "ORIGIN_PORT is served"
sleep 1
assert_no_leak 8 10
chute_stop_within 5
e2e_pass
