-- memory_limit as a float: not a size.
local chute = require "chute"
chute.config {
  listen = { socks = "127.0.0.1:1080" },
  memory_limit = 15.5,
}
