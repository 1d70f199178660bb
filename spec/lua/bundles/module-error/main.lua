-- lib/bad.lua fails while it loads: the message names lib/bad.lua, not main.lua.
local chute = require "chute"
local bad = require "lib.bad"
