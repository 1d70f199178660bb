#!/usr/bin/env bash
# Refusals through the TUN: a SYN to a port nobody listens on is answered
# with a RST as soon as the upstream connect is refused (ECONNREFUSED in
# well under a second, not a timeout); a TCP port the script REJECTs is
# refused the same way; a UDP port it REJECTs gets ICMP port unreachable,
# which a connected UDP socket reports as ConnectionRefusedError.
. "$(dirname "$0")/../netns.sh"
need_root
netns_setup
servers_start http
CLOSED=9      # nothing listens there
UDP_REJ=9999
tun_bundle <<LUA
function chute.route(flow)
  if flow.network == "tcp" and flow.dst_port == $ALT_PORT then return "REJECT" end
  if flow.network == "udp" and flow.dst_port == $UDP_REJ then return "REJECT" end
  return "DIRECT"
end
LUA
tun_chute_start

tcp_try() { # HOST PORT -> "refused 0.012" / "connected ..." / "timeout" / other errors
    cli_py "$1" "$2" <<'PY'
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
t0 = time.time()
try:
    s = socket.create_connection((host, port), timeout=5)
    print(f"connected {time.time() - t0:.3f}")
except ConnectionRefusedError:
    print(f"refused {time.time() - t0:.3f}")
except socket.timeout:
    print("timeout")
except OSError as e:
    print(f"error {e}")
PY
}

refused_fast() { # HOST PORT WHAT
    local out
    check "$3: ECONNREFUSED in < 1 s"
    out=$(tcp_try "$1" "$2")
    say "$3: $out"
    assert_match "^refused " "$out" "$3 is refused"
    lt "${out#refused }" 1 || fail "$3: refused after ${out#refused }s, expected < 1 s"
}

refused_fast "$SRV4" "$CLOSED" "TCP to closed $SRV4:$CLOSED"
refused_fast "$SRV6" "$CLOSED" "TCP to closed [$SRV6]:$CLOSED"
assert_log "flow [0-9]+ tcp tun 198\.19\.0\.1:[0-9]+ -> $SRV4:$CLOSED policy=DIRECT .* close=connect failed" \
    "the refused v4 flow is logged as connect failed"

stats_read R
assert_eq 2 "$R_rst_sent" "rst_sent after two refused connections"

refused_fast "$SRV4" "$ALT_PORT" "TCP to REJECTed $SRV4:$ALT_PORT (nginx listens there)"
refused_fast "$SRV6" "$ALT_PORT" "TCP to REJECTed [$SRV6]:$ALT_PORT"
assert_log "flow [0-9]+ tcp tun 198\.19\.0\.1:[0-9]+ -> $SRV4:$ALT_PORT policy=REJECT rule=\"route\" up=0 down=0 .*close=rejected" \
    "the log shows policy=REJECT for the v4 flow"
assert_log "flow [0-9]+ tcp tun \[fdfe::1\]:[0-9]+ -> \[$SRV6\]:$ALT_PORT policy=REJECT rule=\"route\" up=0 down=0 .*close=rejected" \
    "the log shows policy=REJECT for the v6 flow"
check "no request reached nginx on :$ALT_PORT"
assert_eq 0 "$(grep -c "srv=.*:$ALT_PORT\$" "$NETNS_TMP/access.log" 2>/dev/null || true)" "requests on :$ALT_PORT in nginx's log"

check "port $HTTP_PORT still goes through (DIRECT)"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha "http://$SRV4:$HTTP_PORT/small")" "small via :$HTTP_PORT"

udp_try() { # HOST PORT -> refused / echo / timeout
    cli_py "$1" "$2" <<'PY'
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
s.connect((host, port))
s.settimeout(2)
t0 = time.time()
s.send(b"anyone there?")
try:
    s.recv(100)
    print("answered")
except ConnectionRefusedError:
    print(f"refused {time.time() - t0:.3f}")
except socket.timeout:
    print("timeout")
PY
}
for host in "$SRV4" "$SRV6"; do
    check "UDP to REJECTed $host:$UDP_REJ: ICMP port unreachable -> ConnectionRefusedError"
    out=$(udp_try "$host" "$UDP_REJ")
    say "UDP $host:$UDP_REJ: $out"
    assert_match "^refused 0\.[0-9]+$" "$out" "UDP to $host:$UDP_REJ is refused within a second"
done

# DIRECT to a closed UDP port: the server's ICMP port unreachable reaches
# chute's upstream socket, and chute tells the client the same way.
for host in "$SRV4" "$SRV6"; do
    check "UDP DIRECT to closed $host:9: the upstream's ICMP is passed on"
    out=$(udp_try "$host" 9)
    say "UDP $host:9: $out"
    assert_match "^refused 0\.[0-9]+$" "$out" "UDP to closed $host:9 is refused within a second"
done

stats_read A
say "stats: rst_sent=$A_rst_sent tcp_total=$A_tcp_total udp_total=$A_udp_total flows_total=$A_flows_total route_calls=$A_route_calls"
assert_eq 4 "$A_rst_sent" "rst_sent: 2 refused + 2 rejected"
assert_eq 5 "$A_tcp_total" "tcp_total: 2 refused + 2 rejected + 1 DIRECT"
assert_eq 4 "$A_udp_total" "udp_total: two rejected UDP flows + two DIRECT to a closed port"
assert_decided_once A
assert_eq 9 "$A_flows_total" "flows_total"
chute_alive
pass
