-- A runaway loop while the bundle loads: the load budget stops it.
local chute = require "chute"
local n = 0
while true do n = n + 1 end
