-- memory_limit below the 8 MiB floor.
local chute = require "chute"
chute.config {
  listen = { socks = "127.0.0.1:1080" },
  memory_limit = "4M",
}
