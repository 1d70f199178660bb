#!/usr/bin/env bash
# A reload under a live MITM connection (root): SIGHUP swaps the bundle's
# hooks while a client holds a keep-alive TLS connection; its next request
# runs the new hook, nothing crashes, and chute's CA and its leaves carry
# over (no second mint for the host).
. "$(dirname "$0")/mitmlib.bash"
need_root
hook_bundle() {
    mitm_bundle '  mitm = { hosts = { "test.example" } },' <<LUA
chute.on_request([[^https://test\\.example/echo]], function(req)
  req.headers["x-chute"] = "$1"
end)
function chute.route(flow)
  return "DIRECT"
end
LUA
}
netns_setup
servers_start http dns https
export CHUTE_STATE_DIR=$NETNS_TMP/state SSL_CERT_FILE=$ORIGIN_CA
CHUTE_CA=$CHUTE_STATE_DIR/ca.pem
hook_bundle first
tun_chute_start
wait_file "$CHUTE_CA" 5 || fail "no CA"
ca_before=$(sha_file "$CHUTE_CA")
# One keep-alive connection: a request, then (after the reload) another.
mkfifo "$NETNS_TMP/go"
ip netns exec "$NS_CLI" "$PY" - "$SRV4" "$CHUTE_CA" "$NETNS_TMP/go" >"$NETNS_TMP/ka.out" 2>&1 <<'PY' &
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[2])
c = ctx.wrap_socket(socket.create_connection((sys.argv[1], 443), timeout=20), server_hostname="test.example")
def get():
    c.sendall(b"GET /echo HTTP/1.1\r\nHost: test.example\r\n\r\n")
    buf = b""
    while b"\n" not in buf.split(b"\r\n\r\n", 1)[-1] or b"\r\n\r\n" not in buf:
        buf += c.recv(4096)
    print(buf.split(b"\r\n\r\n", 1)[1].decode().strip(), flush=True)
get()
open(sys.argv[3]).read()  # the test reloads chute meanwhile
get()
PY
KA=$!
NETNS_PIDS+=("$KA")
for i in $(seq 100); do grep -q x_chute "$NETNS_TMP/ka.out" && break; sleep 0.05; done
assert_match "x_chute=first" "$(cat "$NETNS_TMP/ka.out")" "the first hook ran"
hook_bundle second
kill -HUP "$CHUTE_PID"
wait_log "reloaded" 10 || fail "no reload logged"
echo go >"$NETNS_TMP/go"
wait "$KA" || fail "the keep-alive client failed: $(cat "$NETNS_TMP/ka.out")"
assert_match "x_chute=second" "$(tail -1 "$NETNS_TMP/ka.out")" "the same connection's next request runs the new hook"
assert_match "x_chute=second" "$(mcurl https://test.example/echo)" "a new connection too"
assert_eq "$ca_before" "$(sha_file "$CHUTE_CA")" "the CA is the same one"
stats_read
assert_eq 1 "$S_mitm_leaves_minted" "the leaf for test.example was minted once: the cache survived the reload"
chute_alive
pass
