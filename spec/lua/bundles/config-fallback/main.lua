-- A fallback policy the engine does not know.
local chute = require "chute"
chute.config { fallback = "NOPE" }
