#!/usr/bin/env bash
# A flood of UDP 5-tuples through the TUN (issue 19): chute runs with 512
# descriptors, the client sends one datagram from each of 3,000 source
# ports. The mappings stop at half the descriptor limit, the least recently
# used closing for new ones, so chute keeps its descriptors and a TCP
# download through the TUN still completes.
. "$(dirname "$0")/../netns.sh"
need_root
ulimit -n 512 # inherited by chute (and the servers, which need far fewer)
tun_env_up udp http

check "3,000 UDP 5-tuples, one datagram each"
cli_py "$SRV4" "$ECHO_PORT" <<'PY'
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
for i in range(3000):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", (host, port))
    s.close()
PY
sleep 1
fds=$(ls "/proc/$CHUTE_PID/fd" | wc -l)
check "chute holds $fds descriptors of its 512"
[ "$fds" -lt 400 ] || fail "the UDP flood took $fds of chute's 512 descriptors"
assert_eq "$SHA_1M" "$(cli_fetch_sha "http://$SRV4:$HTTP_PORT/1m.bin")" "a TCP download through the TUN completes"
stats_read
check "udp_active=$S_udp_active udp_total=$S_udp_total"
[ "$S_udp_active" -le 256 ] || fail "udp_active $S_udp_active over the cap of 256"
assert_log "udp: 256 mappings \(the cap: half the descriptor limit\)" "the cap is logged once"
chute_stop_within 5
pass
