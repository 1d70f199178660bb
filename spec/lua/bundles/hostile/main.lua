-- One hostile route() per host name (80-hostile.sh).
local chute = require "chute"
chute.config { budget = 10000000 }

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

-- Single C calls that would run for hours between two count hooks.
routes["find.test"] = function()
  return ("a"):rep(3000):find(".-.-.-.-b") and "REJECT" or "DIRECT"
end
routes["gsub.test"] = function()
  return select(2, ("a"):rep(3000):gsub(".-.-.-.-b", "")) and "REJECT" or "DIRECT"
end
routes["rep-empty.test"] = function()
  return string.rep("", 1 << 50) == "" and string.rep("", 1 << 50, "") == "" and "REJECT" or "DIRECT"
end
routes["rep.test"] = function()
  return #string.rep("ab", 1 << 40, ",") > 0 and "REJECT" or "DIRECT"
end
routes["move.test"] = function()
  table.move({}, 1, 1 << 40, 2)
  return "REJECT"
end
routes["insert.test"] = function()
  local t = setmetatable({}, { __len = function() return 1 << 40 end })
  table.insert(t, 1, "x")
  return "REJECT"
end
routes["concat.test"] = function()
  return table.concat(setmetatable({}, { __index = rawlen }), "", 1, 1 << 40)
end

-- Work the instruction count does not see (a VM concatenation copies 4 MiB
-- in one instruction): the wall clock ends the call (budget = 1e7: 1.05 s).
local big = ("x"):rep(1024):rep(4096)
routes["clock.test"] = function()
  local n = 0
  for i = 1, 1e9 do n = n + #(big .. i) end
  return "REJECT"
end

-- Strings that would forge log lines or drive the terminal.
routes["log.test"] = function()
  chute.log("warn", "one\nwarn  flow 9: forged\r\27[2J")
  print("two\nthree")
  error("four\nerror forged", 0)
end

routes["unlock.test"] = function()
  print("getmetatable(_G): " .. tostring(getmetatable(_G)))
  leaked = true
end
routes["nul.test"] = function() return "DIRECT\0junk" end

function chute.route(flow)
  local r = routes[flow.host]
  return r and r() or "DIRECT"
end
