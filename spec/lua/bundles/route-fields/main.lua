-- Prints every flow field, with its Lua type, for the test to compare.
local chute = require "chute"

local fields = { "network", "src_ip", "src_port", "dst_ip", "dst_port", "host", "inbound", "id" }

function chute.route(flow)
  local parts = {}
  for _, k in ipairs(fields) do
    local v = flow[k]
    parts[#parts + 1] = k .. "=" .. tostring(v) .. "(" .. (math.type(v) or type(v)) .. ")"
  end
  print(table.concat(parts, " "))
  print("tostring: " .. tostring(flow))
  return "DIRECT"
end
