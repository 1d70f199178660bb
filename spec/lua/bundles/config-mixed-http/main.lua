local chute = require "chute"
chute.config {
  listen = { mixed = "0.0.0.0:7890", http = "127.0.0.1:7890" },
}
