#!/usr/bin/env bash
# SOCKS5 proxies through the TUN, microsocks in the server namespace: one
# without authentication, one with user/pass (RFC 1929). Downloads through
# each are exact and their flow lines name the proxy; the destination sees
# microsocks as its client; a wrong password fails that flow at once (the
# client gets a reset, not a hang) and the failure is logged with the
# proxy's reason, while the other proxies keep working. Last, UDP through
# a SOCKS5 proxy (UDP ASSOCIATE) with ss-local -u as the peer: 50
# datagrams echo exactly over one flow; a proxy without udp = true carries
# no UDP; when the proxy goes away and comes back, a new flow works and
# so does the old one (its association is made again).
. "$(dirname "$0")/outlib.bash"
need_root
need_cmd microsocks
netns_setup
servers_start http

socks_start 1081
socks_start 1082 -u alice -P 's3cret pass'
tun_bundle <<LUA
chute.proxy "open" { type = "socks5", server = "$SRV4", port = 1081 }
chute.proxy "authed" { type = "socks5", server = "$SRV4", port = 1082,
                       username = "alice", password = "s3cret pass" }
chute.proxy "badpw" { type = "socks5", server = "$SRV4", port = 1082,
                      username = "alice", password = "wrong" }
chute.proxy "noauth" { type = "socks5", server = "$SRV4", port = 1082 }
function chute.route(flow)
  if flow.dst_ip == "$SRV6" then return "badpw" end
  if flow.dst_port == $ALT_PORT then return "authed" end
  if flow.dst_port == 81 then return "noauth" end
  return "open"
end
LUA
tun_chute_start

check "GET /1m.bin through the open proxy and through the authenticated one"
assert_eq "$SHA_1M" "$(cli_fetch_sha --max-time 10 "http://$SRV4:$HTTP_PORT/1m.bin")" "via open"
assert_eq "$SHA_1M" "$(cli_fetch_sha --max-time 10 "http://$SRV4:$ALT_PORT/1m.bin")" "via authed"
assert_log "tcp tun .* -> $SRV4:$HTTP_PORT policy=open .*down=1048[0-9]{3} .*close=done" "the open flow line"
assert_log "tcp tun .* -> $SRV4:$ALT_PORT policy=authed .*down=1048[0-9]{3} .*close=done" "the authed flow line"
check "nginx saw microsocks' address ($SRV4) as the client, not the TUN's"
assert_eq 0 "$(grep -c -v "^$SRV4 " "$NETNS_TMP/access.log" || true)" "access log lines from another address"

check "ten parallel 1 MiB downloads through each proxy"
pids=()
for _ in $(seq 10); do
    for port in "$HTTP_PORT" "$ALT_PORT"; do
        (got=$(ip netns exec "$NS_CLI" curl -s --fail --max-time 20 "http://$SRV4:$port/1m.bin" | sha256sum | cut -d' ' -f1)
         [ "$got" = "$SHA_1M" ]) &
        pids+=($!)
    done
done
bad=0
for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
assert_eq 0 "$bad" "parallel downloads that failed"

check "a wrong password: the flow fails fast, the client sees it, the log says why"
t0=$(now)
rc=$(cli_curl -o /dev/null --max-time 8 "http://[$SRV6]:$HTTP_PORT/small" >/dev/null 2>&1; echo $?)
secs=$(elapsed "$t0")
[ "$rc" != 0 ] || fail "curl through the proxy with a wrong password succeeded"
lt "$secs" 5 || fail "the failed flow took ${secs}s to end (curl rc $rc): it should fail at once"
say "curl rc=$rc after ${secs}s"
assert_log "badpw|policy=badpw" "the failure names the proxy"
assert_log "(auth|password|credentials|rejected)" "the failure says authentication failed"
line=$(grep -E "fd20::2\]?:$HTTP_PORT" "$CHUTE_LOG" | tail -n 1)
say "logged: $line"
assert_match "badpw" "$line" "the log line for the [$SRV6] flow names badpw"

check "no credentials against a server that wants them: refused, logged"
rc=$(cli_curl -o /dev/null --max-time 8 "http://$SRV4:81/small" >/dev/null 2>&1; echo $?)
[ "$rc" != 0 ] || fail "curl through a proxy without the credentials it needs succeeded"
line=$(grep -E "$SRV4:81" "$CHUTE_LOG" | tail -n 1)
say "logged: $line"
assert_match "noauth" "$line" "the log line for the :81 flow names noauth"

check "the good proxies still work after the failures"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 10 "http://$SRV4:$HTTP_PORT/small")" "via open"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 10 "http://$SRV4:$ALT_PORT/small")" "via authed"
chute_alive

# ---------------------------------------------------------------- UDP ASSOCIATE
if ! command -v ss-local >/dev/null 2>&1 || ! command -v ss-server >/dev/null 2>&1; then
    say "no ss-local/ss-server: UDP ASSOCIATE not tested"
    pass
fi
check "UDP through a SOCKS5 proxy (UDP ASSOCIATE): ss-local -u as the SOCKS5 server"
servers_start udp
ss_start 8399 aes-128-gcm "assoc" -u
bg_in "$NS_SRV" "$NETNS_TMP/ss-local.log" ss-local -s "$SRV4" -p 8399 -k assoc -m aes-128-gcm \
    -b "$SRV4" -l 1083 -u -t 60
SSL_PID=$BG_PID
wait_tcp "$NS_SRV" "$SRV4" 1083 10 || fail "ss-local did not start"
tun_bundle <<LUA
chute.proxy "assoc" { type = "socks5", server = "$SRV4", port = 1083, udp = true }
chute.proxy "tcponly" { type = "socks5", server = "$SRV4", port = 1083 }
chute.proxy "open" { type = "socks5", server = "$SRV4", port = 1081 }
function chute.route(flow)
  if flow.network == "udp" and flow.dst_port == 9 then return "tcponly" end
  if flow.network == "udp" then return "assoc" end
  return "open"
end
LUA
kill -HUP "$CHUTE_PID"
assert_log "reloaded .*rule version 2" "chute reloaded the bundle"
# A UDP client driven from the test: "send N" sends N datagrams on one
# socket and prints how many echoed exactly; the socket (one flow) stays.
mkfifo "$NETNS_TMP/udp.in"
cat >"$NETNS_TMP/udpcli.py" <<'PY'
import random, socket, sys
rng = random.Random(5)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((sys.argv[1], int(sys.argv[2])))
s.settimeout(1)
for line in open(sys.argv[3]):
    n = int(line.split()[1])
    ok = 0
    for i in range(n):
        data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 1200)))
        try:
            s.send(data)
            while s.recv(65535) != data:
                pass
            ok += 1
        except (socket.timeout, ConnectionRefusedError):
            pass
    print(f"ok={ok}", flush=True)
PY
ip netns exec "$NS_CLI" "$PY" "$NETNS_TMP/udpcli.py" "$SRV4" "$ECHO_PORT" "$NETNS_TMP/udp.in" >"$NETNS_TMP/udp.out" 2>&1 &
NETNS_PIDS+=($!)
exec 7>"$NETNS_TMP/udp.in"
udp_send() { # N: the result line of that batch
    local before
    before=$(wc -l <"$NETNS_TMP/udp.out")
    echo "send $1" >&7
    for _ in $(seq $(($1 * 2 * 20 + 40))); do
        [ "$(wc -l <"$NETNS_TMP/udp.out")" -gt "$before" ] && break
        sleep 0.05
    done
    tail -n 1 "$NETNS_TMP/udp.out"
}
assert_eq "ok=50" "$(udp_send 50)" "50 datagrams echoed through the SOCKS5 UDP relay"
stats_read
assert_ge 1 "$S_udp_total" "a UDP flow went through chute"

check "a SOCKS5 proxy without udp = true carries no UDP"
out=$(cli_py "$SRV4" 9 <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((sys.argv[1], int(sys.argv[2])))
s.settimeout(1)
try:
    s.send(b"x")
    s.recv(10)
    print("answered")
except (socket.timeout, ConnectionRefusedError):
    print("no answer")
PY
)
assert_eq "no answer" "$out" "UDP through tcponly"
assert_log "udp $SRV4:9: the proxy has udp = false" "the refusal is logged"

check "the proxy goes away and comes back: the same UDP flow works again within 5 s"
kill_wait "$SSL_PID" || true
assert_eq "ok=0" "$(udp_send 3)" "no echo while the SOCKS5 server is gone"
bg_in "$NS_SRV" "$NETNS_TMP/ss-local.log" ss-local -s "$SRV4" -p 8399 -k assoc -m aes-128-gcm \
    -b "$SRV4" -l 1083 -u -t 60
wait_tcp "$NS_SRV" "$SRV4" 1083 10 || fail "ss-local did not restart"
t0=$(now)
got=""
for _ in $(seq 5); do
    got=$(udp_send 1)
    [ "$got" = ok=1 ] && break
done
say "the flow after the restart: $got ($(elapsed "$t0")s)"
# Checked last: the UDP table keeps a dead association until the flow
# idles out (timeouts.udp), so the same 5-tuple stays dark meanwhile.
SAME_FLOW=$got
out=$(cli_py "$SRV4" "$ECHO_PORT" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((sys.argv[1], int(sys.argv[2])))
s.settimeout(2)
s.send(b"fresh flow")
try:
    print("echoed" if s.recv(100) == b"fresh flow" else "differs")
except (socket.timeout, ConnectionRefusedError):
    print("no answer")
PY
)
assert_eq echoed "$out" "a new UDP flow (another source port) after the restart"
assert_eq ok=1 "$SAME_FLOW" "the old UDP flow echoes again after the proxy came back"
exec 7>&-
chute_stop_within 5
assert_log "udp tun .* -> $SRV4:$ECHO_PORT policy=assoc " "the UDP flow line names the SOCKS5 proxy"
pass
