#!/usr/bin/env bash
# examples/tun as it ships (only its device name made unique for the run):
# the excluded private ranges stay on the main table, everything else goes
# through the TUN; QUIC (UDP/443) is refused by its route().
. "$(dirname "$0")/../netns.sh"
need_root
netns_setup
servers_start http
sed "s/name = \"chute0\"/name = \"$TUN_DEV\"/" "$CHUTE_TOP/examples/tun/main.lua" >"$BUNDLE/main.lua"
grep -q "name = \"$TUN_DEV\"" "$BUNDLE/main.lua" || fail "examples/tun no longer names its device chute0"
tun_chute_start

check "the example's exclude list keeps $SRV4 (in 10.0.0.0/8) and $SRV6 (in fc00::/7) off the TUN"
assert_match "dev veth0" "$(ip -n "$NS_CLI" route get "$SRV4" 2>&1)" "$SRV4 leaves through veth0"
assert_match "lookup main" "$(ip -n "$NS_CLI" -4 rule show priority 9000)" "v4 exclude rules in place"
assert_match "lookup main" "$(ip -n "$NS_CLI" -6 rule show priority 9000)" "v6 exclude rule in place"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha "http://$SRV4/small")" "the excluded server is reached directly"
stats_read A
assert_eq 0 "$A_tcp_total" "no TCP flow went through chute"

check "an address outside the excludes goes into the TUN: UDP/443 is refused there"
assert_match "dev $TUN_DEV" "$(ip -n "$NS_CLI" route get 192.0.2.1 2>&1)" "192.0.2.1 is routed into the TUN"
out=$(cli_py <<'PY'
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("192.0.2.1", 443))
s.settimeout(2)
s.send(b"quic?")
try:
    s.recv(100)
    print("answered")
except ConnectionRefusedError:
    print("refused")
except socket.timeout:
    print("timeout")
PY
)
assert_eq refused "$out" "UDP/443 to 192.0.2.1 refused by the example's route()"
stats_read B
assert_eq 1 "$B_udp_total" "one UDP flow, through the TUN"
chute_alive
pass
