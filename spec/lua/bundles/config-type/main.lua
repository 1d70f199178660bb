-- A value of the wrong type.
local chute = require "chute"
chute.config { budget = "x" }
