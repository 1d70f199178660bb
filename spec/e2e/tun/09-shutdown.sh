#!/usr/bin/env bash
# SIGTERM with flows open (a slow download, idle TCP connections v4 and
# v6, a UDP flow): chute exits 0 promptly, the open TCP clients are reset,
# every flow is logged as closed by the shutdown, and the TUN, its routes
# and the auto_route rules (capture 9001, exclude 9000) are gone from the
# client namespace. Through examples/embed/host (CHUTE_VIA_HOST=1) the
# device and the rules are the system's: the host's part is to close the
# device (its carrier goes), the system then removes them.
. "$(dirname "$0")/../netns.sh"
need_root
TUN_EXTRA='exclude = { "10.9.0.0/16", "fd99::/64" }'
tun_env_up http udp
big_file 8

if [ -z "${CHUTE_VIA_HOST:-}" ]; then
check "auto_route's rules and table are in place while chute runs"
assert_match "not from all fwmark $TUN_MARK lookup 2022" "$(ip -n "$NS_CLI" -4 rule show priority 9001)" "the v4 capture rule"
assert_match "not from all fwmark $TUN_MARK lookup 2022" "$(ip -n "$NS_CLI" -6 rule show priority 9001)" "the v6 capture rule"
assert_match "default dev $TUN_DEV" "$(ip -n "$NS_CLI" -4 route show table 2022)" "table 2022's v4 default route"
assert_match "default dev $TUN_DEV" "$(ip -n "$NS_CLI" -6 route show table 2022)" "table 2022's v6 default route"
assert_match "from all to 10\.9\.0\.0/16 lookup main" "$(ip -n "$NS_CLI" -4 rule show priority 9000)" "the v4 exclude rule"
assert_match "from all to fd99::/64 lookup main" "$(ip -n "$NS_CLI" -6 rule show priority 9000)" "the v6 exclude rule"
fi

# Idle TCP connections (v4 and v6) and a UDP flow, held open by one client
# that reports what each TCP socket sees when chute goes away.
cli_py "$SRV4" "$SRV6" "$HTTP_PORT" "$ECHO_PORT" "$NETNS_TMP/held" >"$NETNS_TMP/held.out" 2>&1 <<'PY' &
import socket, sys, time
v4, v6, port, eport, ready = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
tcp = [socket.create_connection((h, port), timeout=5) for h in (v4, v4, v4, v6, v6)]
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.connect((v4, eport)); u.settimeout(2); u.send(b"hi"); assert u.recv(10) == b"hi"
open(ready, "w").write("ready\n")
for s in tcp:
    s.settimeout(10)
    try:
        d = s.recv(10)
        print("eof" if d == b"" else f"data {d!r}")
    except ConnectionResetError:
        print("reset")
    except socket.timeout:
        print("timeout")
PY
HELD_PID=$!
NETNS_PIDS+=("$HELD_PID")
wait_file "$NETNS_TMP/held" 5 || fail "the idle connections did not open: $(cat "$NETNS_TMP/held.out")"

cli curl --silent --fail --max-time 30 -o /dev/null "http://$SRV4:$HTTP_PORT/slow/big.bin" &
DL_PID=$!
NETNS_PIDS+=("$DL_PID")
sleep 0.7
kill -0 "$DL_PID" 2>/dev/null || fail "the download ended before the SIGTERM"

stats_read B
say "open before SIGTERM: flows_active=$B_flows_active tcp_active=$B_tcp_active udp_active=$B_udp_active"
assert_eq 7 "$B_flows_active" "flows open: 5 idle TCP + 1 download + 1 UDP"

check "SIGTERM: exit status 0 within 5 s"
chute_stop_within 5

check "the open clients see the end"
rc=0
wait "$DL_PID" || rc=$?
say "the download's curl exited $rc"
[ "$rc" -ne 0 ] || fail "the download cannot have completed (8 MiB at 2 MiB/s, cut after 0.7 s)"
wait "$HELD_PID" || true
assert_eq "reset reset reset reset reset" "$(tr '\n' ' ' <"$NETNS_TMP/held.out" | sed 's/ $//')" \
    "each idle TCP connection is reset by chute's shutdown"

check "every open flow was logged as closed by the shutdown"
assert_eq 7 "$(flow_lines "close=shutdown" | wc -l)" "flow lines with close=shutdown"
assert_log "stopping: closing" "chute logged its stop"
assert_log "info  stopped$" "chute logged that it stopped"
stats_parse E
assert_eq 0 "$E_flows_active" "flows_active in the exit stats"

if [ -n "${CHUTE_VIA_HOST:-}" ]; then
    check "the host closed the system's device: no carrier"
    assert_match "NO-CARRIER" "$(ip -n "$NS_CLI" link show dev "$TUN_DEV")" "$TUN_DEV's flags after the host exited"
    assert_log "^host: stopped" "the host logged its stop"
    # What the system does when the VPN ends: the device and its rules go.
    cli ip link del "$TUN_DEV"
    for f in -4 -6; do cli ip "$f" rule del priority 9001; done
fi
check "the TUN, its routes and the rules are gone"
assert_eq "" "$(ip -n "$NS_CLI" rule show priority 9001)" "v4 rules at priority 9001"
assert_eq "" "$(ip -n "$NS_CLI" -6 rule show priority 9001)" "v6 rules at priority 9001"
assert_eq "" "$(ip -n "$NS_CLI" -4 rule show priority 9000)" "v4 exclude rules at priority 9000"
assert_eq "" "$(ip -n "$NS_CLI" -6 rule show priority 9000)" "v6 exclude rules at priority 9000"
assert_eq "" "$( (ip -n "$NS_CLI" -4 rule show; ip -n "$NS_CLI" -6 rule show) | grep -E '^900[01]:' || true)" "no rule at 9000/9001 at all"
if ip -n "$NS_CLI" link show dev "$TUN_DEV" >/dev/null 2>&1; then
    fail "the TUN $TUN_DEV still exists after chute exited"
fi
assert_eq "" "$(ip -n "$NS_CLI" -4 route show table 2022 2>/dev/null; ip -n "$NS_CLI" -6 route show table 2022 2>/dev/null)" "table 2022 is empty"
check "the client namespace reaches the server directly again"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha "http://$SRV4:$HTTP_PORT/small")" "small without chute"
pass
