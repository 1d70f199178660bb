local chute = require "chute"
chute.config {
  log_format = "xml",
}
