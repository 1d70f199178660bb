-- Distinct ports, port 0 twice (any free port), and the same port on two
-- loopback addresses: none of these clash.
local chute = require "chute"
chute.config {
  listen = { socks = "127.0.0.1:0", http = "127.0.0.1:0" },
  dns = { upstream = "127.0.0.1:9", listen = "127.0.0.2:7891" },
  control = { listen = "127.0.0.1:7891" },
}
function chute.route(flow) return "DIRECT" end
