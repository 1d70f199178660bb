local chute = require "chute"
local d = chute.ruleset "domains.txt"
