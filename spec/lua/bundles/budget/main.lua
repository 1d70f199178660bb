-- Runaway loops under the default budget (100000 instructions a call),
-- some wrapped in ways that would swallow an ordinary error.
local chute = require "chute"

-- Created while the bundle loads, resumed inside route().
local spinner = coroutine.create(function() while true do end end)

function chute.route(flow)
  local h = flow.host
  if h == "loop.test" then
    while true do end
  elseif h == "pcall.test" then
    local ok = pcall(function() while true do end end); return "REJECT"
  elseif h == "xpcall.test" then
    local ok = xpcall(function() while true do end end, function(m) return m end); return "REJECT"
  elseif h == "coroutine.test" then
    local ok = coroutine.resume(coroutine.create(function() while true do end end)); return "REJECT"
  elseif h == "load-coroutine.test" then
    local ok = coroutine.resume(spinner); return "REJECT"
  elseif h == "within.test" then
    local x = 0
    for i = 1, 5000 do x = x + i end
    return x == 12502500 and "REJECT" or "DIRECT"
  end
  return "DIRECT"
end
