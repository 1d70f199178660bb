#!/usr/bin/env bash
# SIGHUP reload with flows in flight: a rate-limited download (6 MiB at
# 2 MiB/s) and a UDP exchange are running when the bundle is rewritten to
# REJECT tcp/$HTTP_PORT and udp/$ECHO_PORT and chute gets SIGHUP. The
# flows in flight keep their decision (the download completes with the
# right sha256, the same UDP socket is still echoed); new ones get the new
# decision (refused).
. "$(dirname "$0")/../netns.sh"
need_root
tun_env_up http udp
big_file 6

route_direct_then() { # the bundle: REJECT_LUA decides first
    tun_bundle <<LUA
function chute.route(flow)
  $1
  return "DIRECT"
end
LUA
}

check "a fresh connection to :$HTTP_PORT works before the reload"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha "http://$SRV4:$HTTP_PORT/small")" "small before the reload"

# The UDP client: one echo now, one more after $NETNS_TMP/go appears.
cli_py "$SRV4" "$ECHO_PORT" "$NETNS_TMP/go" >"$NETNS_TMP/udp.out" 2>&1 <<'PY' &
import os, socket, sys, time
host, port, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((host, port))
s.settimeout(2)
s.send(b"before"); print("before", s.recv(100) == b"before", flush=True)
deadline = time.time() + 20
while not os.path.exists(go) and time.time() < deadline:
    time.sleep(0.02)
try:
    s.send(b"after"); print("after", s.recv(100) == b"after", flush=True)
except OSError as e:
    print("after", type(e).__name__, flush=True)
PY
UDP_PID=$!
NETNS_PIDS+=("$UDP_PID")
wait_file "$NETNS_TMP/udp.out" 5 || fail "the UDP client did not get its first echo"

t0=$(now)
cli curl --silent --show-error --fail --max-time 60 -o "$NETNS_TMP/dl.bin" \
    "http://$SRV4:$HTTP_PORT/slow/big.bin" 2>"$NETNS_TMP/dl.err" &
DL_PID=$!
NETNS_PIDS+=("$DL_PID")
sleep 1

check "the download is in flight at the reload"
kill -0 "$DL_PID" 2>/dev/null || fail "the download ended before the reload ($(cat "$NETNS_TMP/dl.err"))"
part=$(stat -c %s "$NETNS_TMP/dl.bin" 2>/dev/null || echo 0)
say "downloaded $part of $BIG_SIZE bytes before the reload"
lt "$part" "$BIG_SIZE" || fail "the download was already complete"
assert_eq 0 "$(flow_lines "-> $SRV4:$HTTP_PORT .* down=[0-9]{7,} " | wc -l)" "no big flow closed yet"

route_direct_then "if (flow.network == \"tcp\" and flow.dst_port == $HTTP_PORT) or (flow.network == \"udp\" and flow.dst_port == $ECHO_PORT) then return \"REJECT\" end"
kill -HUP "$CHUTE_PID"
assert_log "reloaded .*rule version 2" "chute logged the reload"
touch "$NETNS_TMP/go"

check "new connections get the new decision"
out=$(cli_py "$SRV4" "$HTTP_PORT" <<'PY'
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3); print("connected")
except ConnectionRefusedError:
    print("refused")
except OSError as e:
    print(e)
PY
)
assert_eq refused "$out" "a new TCP connection to :$HTTP_PORT after the reload"
# The flows before the reload put "$SRV4:$HTTP_PORT -> DIRECT" in the
# decision cache; the reload must have emptied it.
assert_log "flow [0-9]+ tcp tun 198\.19\.0\.1:[0-9]+ -> $SRV4:$HTTP_PORT policy=REJECT rule=\"route\" up=0 down=0 .*close=rejected" \
    "the new :$HTTP_PORT flow was decided by the new route(), not by a cached decision"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha "http://$SRV4:$ALT_PORT/small")" ":$ALT_PORT is still DIRECT"
out=$(cli_py "$SRV4" "$ECHO_PORT" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((sys.argv[1], int(sys.argv[2]))); s.settimeout(2); s.send(b"new")
try:
    s.recv(100); print("answered")
except ConnectionRefusedError:
    print("refused")
except OSError as e:
    print(e)
PY
)
assert_eq refused "$out" "a new UDP flow to :$ECHO_PORT after the reload"

check "the flows in flight kept their decision"
wait "$UDP_PID" || true
assert_eq "before True
after True" "$(cat "$NETNS_TMP/udp.out")" "the UDP socket opened before the reload is still echoed"
rc=0
wait "$DL_PID" || rc=$?
secs=$(elapsed "$t0")
assert_eq 0 "$rc" "curl's exit status for the in-flight download ($(cat "$NETNS_TMP/dl.err"))"
say "the download took ${secs}s"
assert_eq "$SHA_BIG" "$(sha256_stream <"$NETNS_TMP/dl.bin")" "the in-flight download's sha256"
assert_log "flow [0-9]+ tcp tun .* -> $SRV4:$HTTP_PORT policy=DIRECT $RULE_RE up=[0-9]+ down=[0-9]{7,} .*close=done" \
    "the download's flow closed normally as DIRECT"

stats_read
say "stats: rule_version=$S_rule_version route_calls=$S_route_calls flows_total=$S_flows_total"
assert_eq 2 "$S_rule_version" "rule_version after one reload"
assert_decided_once
assert_eq 6 "$S_flows_total" "flows: small, udp echo, download, refused tcp, :$ALT_PORT, refused udp"
chute_alive
pass
