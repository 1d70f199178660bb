-- chute.config may be called once; the second call is the error.
local chute = require "chute"
chute.config { log_level = "info" }
chute.config { log_level = "debug" }
