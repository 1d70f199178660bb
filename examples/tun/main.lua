-- Capture every flow of this machine (or network namespace) on a TUN device
-- and relay it DIRECT, except what the rules below reject. Needs root
-- (CAP_NET_ADMIN): `sudo build/chute run examples/tun`.
local chute = require "chute"

chute.config {
  tun = {
    name = "chute0",
    address = { "198.19.0.1/30", "fdfe:dcba:9876::1/126" },
    mtu = 1500,          -- lwIP's MSS follows it; offload sends 64 KiB packets anyway
    auto_route = true,   -- policy routes send everything without chute's mark into the TUN
    exclude = { "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7" },
  },
  -- Upstream sockets carry this mark so they skip the TUN (the default with
  -- auto_route); `interface = "eth0"` would bind them to a device instead.
  outbound = { fwmark = 0x2022 },
  timeouts = { connect = 10, idle = 300, udp = 60 },
}

-- Called once per new flow; flow.inbound is "tun", flow.network "tcp" or
-- "udp", flow.dst_ip / flow.dst_port the destination. Decisions that read
-- only destination fields are cached: later flows to the same place skip Lua.
function chute.route(flow)
  if flow.network == "udp" and flow.dst_port == 443 then
    return "REJECT"   -- no QUIC: browsers fall back to TCP at once
  end
  return "DIRECT"
end
