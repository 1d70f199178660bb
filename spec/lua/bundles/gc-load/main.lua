-- A looping finalizer made at load: collected by the load's own collection
-- or by lua_close, where hooks are off; it must be refused, not run.
local chute = require "chute"
setmetatable({}, { __gc = function() while true do end end })
