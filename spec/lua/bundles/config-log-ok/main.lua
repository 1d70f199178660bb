local chute = require "chute"
chute.config {
  log_format = "json", log_file = "chute.log",
  listen = { mixed = { address = "127.0.0.1:7890", users = { a = "b" } } },
}
function chute.route(flow) return "DIRECT" end
