-- One hostile route() per host name (80-hostile.sh).
local chute = require "chute"

local function loop() while true do end end

local routes = {}

routes["gc.test"] = function()
  setmetatable({}, { __gc = loop })
  return "REJECT"
end

routes["file-gc.test"] = function()
  local mt = getmetatable(io.open("main.lua"))
  print("file metatable: " .. tostring(mt))
  return mt == false and "REJECT" or "DIRECT"
end

routes["xpcall-loop.test"] = function()
  xpcall(loop, loop)
  return "REJECT"
end

routes["xpcall.test"] = function()
  local ok, a, b = xpcall(function(x) return x, 2 end, loop, 1)
  local ok2, m = xpcall(error, function(e) return "handled " .. e end, "boom", 0)
  local ok3, m3 = xpcall(error, function(e) error("again", 0) end, "boom", 0)
  local co = coroutine.wrap(function()
    return xpcall(function() return coroutine.yield(1) + 1 end, loop)
  end)
  local y = co()
  local ok4, v4 = co(41)
  print(ok, a, b, ok2, m, ok3, m3, y, ok4, v4)
  return (ok and a == 1 and b == 2 and not ok2 and m == "handled boom" and not ok3 and
          m3 == "again" and y == 1 and ok4 and v4 == 42) and "REJECT" or "DIRECT"
end

function chute.route(flow)
  local r = routes[flow.host]
  return r and r() or "DIRECT"
end
