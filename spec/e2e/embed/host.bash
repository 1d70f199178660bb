# The embed suite's harness on top of spec/e2e/netns.sh: the system (this
# script, as the OS does for a NetworkExtension) makes the TUN device, its
# addresses and the policy routes; examples/embed/host opens the device,
# moves its packets through chute's API and marks chute's upstream sockets
# itself (protect_socket). Source after netns.sh.

HOST_BIN=${HOST_BIN:-$(dirname "$CHUTE")/embed-host}

# embed_tun_up: the device and the routes that auto_route would make.
embed_tun_up() {
    [ -x "$HOST_BIN" ] || fail "no embed-host at $HOST_BIN (cmake --build build --target embed-host)"
    cli ip tuntap add dev "$TUN_DEV" mode tun || fail "ip tuntap add $TUN_DEV"
    cli ip addr add 198.19.0.1/30 dev "$TUN_DEV"
    cli ip addr add fdfe::1/126 dev "$TUN_DEV" nodad
    cli ip link set "$TUN_DEV" mtu 1500 txqueuelen 10000 up
    local f
    for f in -4 -6; do
        cli ip "$f" route add default dev "$TUN_DEV" table 2022
        cli ip "$f" rule add not fwmark "$TUN_MARK" table 2022 priority 9001
    done
}

# embed_bundle <<LUA: main.lua = a config with no listeners (the host
# brings the packets) + the route code.
embed_bundle() {
    {
        cat <<LUA
local chute = require "chute"
chute.config {
  log_level = "info",
  fallback = "DIRECT",
  timeouts = { connect = 5, idle = 60, udp = 30 },
${1:-}
}
LUA
        cat
    } >"$BUNDLE/main.lua"
}

# embed_host_start: the host in the client namespace, as CHUTE_PID (the
# harness's stats_read, chute_alive and cleanup then apply to it).
embed_host_start() {
    [ -s "$CHUTE_LOG" ] && mv "$CHUTE_LOG" "$CHUTE_LOG.prev"
    : >"$CHUTE_LOG"
    ip netns exec "$NS_CLI" "$HOST_BIN" -m "$TUN_MARK" ${HOST_ARGS:-} "$TUN_DEV" "$BUNDLE" >>"$CHUTE_LOG" 2>&1 &
    CHUTE_PID=$!
    local i
    for i in $(seq 200); do
        kill -0 "$CHUTE_PID" 2>/dev/null || chute_alive
        if grep -q "chute .* running" "$CHUTE_LOG"; then
            # spec/e2e/embed/via-host.bash: proof the host ran the case.
            [ -n "${CHUTE_VIA_HOST_MARK:-}" ] && grep "^host: tun " "$CHUTE_LOG" >>"$CHUTE_VIA_HOST_MARK"
            return 0
        fi
        sleep 0.05
    done
    fail "embed-host did not start in 10 s"
}

embed_env_up() {
    netns_setup
    servers_start "$@"
    embed_tun_up
    [ -f "$BUNDLE/main.lua" ] || embed_bundle <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
    embed_host_start
}
