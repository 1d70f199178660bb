-- A bundle that configures but defines no route().
local chute = require "chute"
chute.config { fallback = "REJECT" }
