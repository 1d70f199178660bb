-- route() fails for one name: chute route must not exit 0 there.
local chute = require "chute"
chute.config { listen = { socks = "127.0.0.1:0" } }
function chute.route(flow)
  if flow.host == "broken.test" then error("no such table") end
  if flow.host == "option.test" then return "DIRECT", { mitm = "yes" } end
  return "REJECT"
end
