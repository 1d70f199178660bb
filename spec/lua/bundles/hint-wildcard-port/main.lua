-- dns.listen on every address takes the SOCKS5 port on loopback too.
local chute = require "chute"
chute.config {
  listen = { socks = "127.0.0.1:5353" },
  dns = {
    upstream = "127.0.0.1:9",
    listen = "0.0.0.0:5353",
  },
}
function chute.route(flow) return "DIRECT" end
