-- A hook must be a function.
local chute = require "chute"
chute.route = "DIRECT"
