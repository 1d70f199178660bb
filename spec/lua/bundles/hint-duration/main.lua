-- A duration written as a string, deep in a big table: its own line.
local chute = require "chute"
chute.config {
  listen = { socks = "127.0.0.1:0" },
  log_level = "info",
  -- a comment with { braces } and "quotes" = 1
  dns = { upstream = { "127.0.0.1:9" }, [ [[mode]] ] = "fake-ip" },
  timeouts = {
    idle = 60,
    connect = "5s",
  },
}
