-- SOCKS5 and HTTP on one port: the second bind would fail.
local chute = require "chute"
chute.config {
  listen = {
    socks = "127.0.0.1:7890",
    http = "127.0.0.1:7890",
  },
}
function chute.route(flow) return "DIRECT" end
