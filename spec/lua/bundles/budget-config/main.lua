-- A bundle that raises its budget: work the default would stop runs here.
local chute = require "chute"
chute.config { budget = 10000000 }

function chute.route(flow)
  if flow.host == "forever.test" then
    while true do end
  end
  local x = 0
  for i = 1, 200000 do x = x + i end
  return "REJECT"
end
