-- No listener, no TUN, no dns.listen: run refuses it, so check does.
local chute = require "chute"
chute.config { log_level = "warn" }
function chute.route(flow) return "DIRECT" end
