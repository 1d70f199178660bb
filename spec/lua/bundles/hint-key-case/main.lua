local chute = require "chute"
chute.config {
  listen = { socks = "127.0.0.1:0" },
  Log_Level = "debug",
}
