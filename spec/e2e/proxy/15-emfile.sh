#!/usr/bin/env bash
# Out of descriptors (issue 19): chute's fd limit lowered to 64, then 200
# idle connections. The listener pauses 100 ms at a time (no busy loop:
# CPU time stays low), says so once, and serves new clients once the idle
# ones are gone.
. "$(dirname "$0")/../lib.sh"

need_cmd prlimit
e2e_init
origin_start
bundle_write <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
chute_start
SOCKS="socks5h://127.0.0.1:$SOCKS_PORT"
assert_eq 0 "$(curl_rc -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")" "served before"
prlimit --pid "$CHUTE_PID" --nofile=64:64

cpu() { awk '{ print $14 + $15 }' "/proc/$CHUTE_PID/stat"; } # utime + stime, ticks
say "hold 200 idle SOCKS5 connections for 3 s"
before=$(cpu)
python3 - "$SOCKS_PORT" <<'PY' &
import socket, sys, time
held = []
for _ in range(200):
    try:
        held.append(socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2))
    except OSError:
        pass
time.sleep(3)
PY
holder=$!
sleep 2.5
after=$(cpu)
ticks=$((after - before))
check "chute used $ticks ticks of CPU in 2.5 s while out of descriptors (bound 20)"
[ "$ticks" -le 20 ] || fail "busy loop on EMFILE: $ticks ticks in 2.5 s"
pauses=$(log_count 'accept on socks: Too many open files')
assert_eq 1 "$pauses" "one log line for the whole episode"
wait "$holder"

say "descriptors free again"
sleep 1
assert_eq 0 "$(curl_rc -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small")" "a new client is served"
assert_log "accept on socks: resumed after [0-9]+ pauses" "the resume is logged"
chute_stop_within 2
e2e_pass
