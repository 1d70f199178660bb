-- Holds about 10 MiB after loading, over its own 4 MiB cap.
local chute = require "chute"
chute.config { lua_memory_mb = 4 }
local hold = {}
for i = 1, 300000 do hold[i] = {} end
function chute.route(flow) return #hold > 0 and "REJECT" or "DIRECT" end
