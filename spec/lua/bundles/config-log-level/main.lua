-- A log level that is not error, warn, info or debug.
local chute = require "chute"
chute.config { log_level = "verbose" }
