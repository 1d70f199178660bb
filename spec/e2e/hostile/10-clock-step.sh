#!/usr/bin/env bash
# The wall clock steps 40 s ahead under a running chute (an NTP step, a
# VM's time sync: this machine class was seen moving +1 s and +34 s against
# CLOCK_MONOTONIC). Deadlines and idle timers run on the monotonic clock,
# so nothing pending is closed early: a relayed flow that spoke 4 s before
# the step keeps its 6 s idle allowance, and unfinished control clients get
# their whole 10 s. The step comes from clockstep.c (LD_PRELOAD, built
# here); the log's timestamps show it took effect. ~15 s.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hostile.bash"

need_cmd cc
e2e_init
cc -shared -fPIC -O2 -o "$E2E_TMP/clockstep.so" "$HOSTILE_DIR/clockstep.c" -ldl ||
    fail "cannot build the clock-step shim"
REAL_CHUTE=$CHUTE
CHUTE=$E2E_TMP/chute-stepped
cat >"$CHUTE" <<EOF
#!/bin/sh
# ASan wants its runtime first in the library list; the shim comes first here.
export LD_PRELOAD="$E2E_TMP/clockstep.so" CLOCKSTEP_FILE="$E2E_TMP/step" CLOCKSTEP_SECS=40
export ASAN_OPTIONS="\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}verify_asan_link_order=0"
exec "$REAL_CHUTE" "\$@"
EOF
chmod +x "$CHUTE"

read -r CTL_PORT ECHO_PORT < <(e2e_ports 2) || fail "e2e_ports: no free ports"
bundle_write "  control = { listen = \"127.0.0.1:$CTL_PORT\" },
  timeouts = { connect = 3, idle = 6 }," <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
python3 - "$ECHO_PORT" "$E2E_TMP/echo.ready" <<'PY' &
import socket, sys, threading
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", int(sys.argv[1])))
ls.listen(16)
open(sys.argv[2], "w").write("ready\n")
def echo(c):
    while True:
        d = c.recv(4096)
        if not d:
            break
        c.sendall(d)
    c.close()
while True:
    c, _ = ls.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
PY
E2E_EXTRA_PIDS+=($!)
wait_file_l "$E2E_TMP/echo.ready" || fail "the echo server did not start"
chute_start
wait_port 127.0.0.1 "$CTL_PORT" 10 || fail "the control API does not accept"
first=$(head -n 1 "$CHUTE_LOG" | cut -c1-23)

say "5 silent control clients, and a SOCKS5 flow to an echo server; the wall clock steps 40 s at 4 s"
flood hold 127.0.0.1 "$CTL_PORT" 5 --secs 13 >"$E2E_TMP/ctl.json" &
fl=$!
python3 - "$SOCKS_PORT" "$ECHO_PORT" "$E2E_TMP/step" <<'PY' || fail "the relayed flow did not survive the clock step"
import socket, sys, time
socks, echo, step = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
t0 = time.monotonic()
s = socket.create_connection(("127.0.0.1", socks), timeout=5)
s.sendall(b"\x05\x01\x00")
assert s.recv(2) == b"\x05\x00", "SOCKS5 method"
s.sendall(b"\x05\x01\x00\x01\x7f\x00\x00\x01" + echo.to_bytes(2, "big"))
assert s.recv(10)[:2] == b"\x05\x00", "SOCKS5 CONNECT"
def say(what, at):
    time.sleep(max(0, t0 + at - time.monotonic()))
    s.sendall(what)
    got = s.recv(64)
    print("10-clock-step: %.1f s: sent %r, got %r" % (time.monotonic() - t0, what, got))
    if got != what:
        sys.exit(1)
say(b"before", 0.2)
say(b"spoke", 3.0)
time.sleep(max(0, t0 + 4.0 - time.monotonic()))
open(step, "w").write("step\n")
# The relay's idle timer (6 s, armed at the start) fires at ~6.2 s: 3.2 s
# after the last byte by the monotonic clock, 43 s by the stepped wall clock.
say(b"after", 7.5)
PY
check "a flow that spoke 4.5 s before its next bytes was kept across the step (idle 6 s)"
wait "$fl"
python3 - "$E2E_TMP/ctl.json" <<'PY' || fail "the control clients were not given their 10 s"
import json, sys
j = json.load(open(sys.argv[1]))
t = j["closed_at"]
print("control: %d open, closed after %s s" % (j["opened"], sorted(set(t), key=lambda x: x or 99)))
sys.exit(0 if j["opened"] == 5 and all(x is not None and 9.5 <= x <= 12.5 for x in t) else 1)
PY
check "unfinished control clients were closed at their 10 s deadline, not at the step"

# The shim did step chute's wall clock: its log's timestamps jumped.
kill -USR1 "$CHUTE_PID"
wait_log 'stats flows_active=' 5
last=$(grep 'stats flows_active=' "$CHUTE_LOG" | tail -n 1 | cut -c1-23)
gap=$(python3 -c "
from datetime import datetime as d
f = '%Y-%m-%d %H:%M:%S.%f'
print(int((d.strptime('$last', f) - d.strptime('$first', f)).total_seconds()))")
assert_ge 45 "$gap" "chute's log clock moved 40 s ahead ($gap s between its first and last lines)"
assert_log 'flow [0-9]+ tcp socks .*:'"$ECHO_PORT"' .*close=done' "the flow ended normally"
