-- Every key chute.config knows, each with a valid value.
local chute = require "chute"
chute.config {
  log_level = "warn",
  fallback = "REJECT",
  listen = {
    socks = { address = "127.0.0.1:1080", users = { alice = "secret" } },
    http = "[::1]:8080",
  },
  timeouts = { connect = 2.5, idle = 60 },
  budget = 5000,
  lua_memory_mb = 16,
}
function chute.route(flow)
  return "DIRECT"
end
