-- Misusing the flow: a field it does not have, and writing to it.
local chute = require "chute"

function chute.route(flow)
  local h = flow.host
  if h == "field.test" then
    return flow.dst_host
  elseif h == "write.test" then
    flow.host = "elsewhere.test"
  elseif h == "protected.test" then
    print("unknown field: " .. select(2, pcall(function() return flow.port end)))
    print("write: " .. select(2, pcall(function() flow.dst_port = 1 end)))
    print("metatable: " .. tostring(getmetatable(flow)))
    print("host still: " .. flow.host)
    return "REJECT"
  end
  return "DIRECT"
end
