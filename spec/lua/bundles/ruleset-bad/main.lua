local chute = require "chute"
local bad = chute.ruleset "bad.list"
