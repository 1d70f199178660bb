-- fallback = "REJECT" is what a failing route() gives.
local chute = require "chute"
chute.config { fallback = "REJECT" }

function chute.route(flow)
  local h = flow.host
  if h == "error.test" then
    error("broken")
  elseif h == "loop.test" then
    while true do end
  elseif h == "nope.test" then
    return "NOPE"
  elseif h == "nil.test" then
    return nil
  end
  return "DIRECT"
end
