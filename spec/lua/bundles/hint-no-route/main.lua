-- A listener but no route(): every flow gets the fallback.
local chute = require "chute"
chute.config { listen = { socks = "127.0.0.1:0" }, fallback = "REJECT" }
