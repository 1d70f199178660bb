-- The bundle examples/embed/host runs: no listeners (the host brings the
-- packets), everything DIRECT. The host marks chute's upstream sockets
-- itself (protect_socket), so no outbound.fwmark here.
local chute = require "chute"

chute.config {
  log_level = "info",
  fallback = "DIRECT",
  timeouts = { connect = 10, idle = 300, udp = 60 },
}

function chute.route(flow)
  return "DIRECT"
end
