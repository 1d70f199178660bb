-- chute's default bundle: SOCKS5 on 127.0.0.1:1080, HTTP on 127.0.0.1:8080,
-- both on 127.0.0.1:7890 (a mixed port, as Clash's mixed-port), everything
-- DIRECT except one REJECT example.
local chute = require "chute"

chute.config {
  log_level = "info",
  fallback = "DIRECT",                 -- when route() fails or returns nil
  listen = {
    socks = "127.0.0.1:1080",
    http = "127.0.0.1:8080",
    mixed = "127.0.0.1:7890",          -- SOCKS5 and HTTP on one port, by the first byte
  },
  timeouts = { connect = 10, idle = 300 },
}

-- Called once per new flow. flow.host is the name the client asked for (nil
-- for an IP literal); flow.dst_ip / flow.dst_port, flow.src_ip / src_port,
-- flow.network ("tcp") and flow.inbound ("socks", "http") are there too.
function chute.route(flow)
  local host = flow.host
  if host and (host == "ads.example" or host:sub(-12) == ".ads.example") then
    return "REJECT"
  end
  return "DIRECT"
end
