-- An 8 MiB cap; the budget is raised so memory, not instructions, runs out.
local chute = require "chute"
chute.config { lua_memory_mb = 8, budget = 100000000 }

local function hog()
  local t = {}
  for i = 1, 1e8 do t[i] = i end
  return t
end

function chute.route(flow)
  local h = flow.host
  if h == "table.test" then
    hog()
  elseif h == "string.test" then
    local s = string.rep("x", 16 * 1024 * 1024)
  elseif h == "pcall.test" then
    print("pcall(hog): " .. select(2, pcall(hog)))
    local small = {}
    for i = 1, 1000 do small[i] = i end
    return #small == 1000 and "REJECT" or "DIRECT"
  end
  return "DIRECT"
end
