local chute = require "chute"
chute.route = chute.rules {
  {"DOMAIN-SUFIX", "b.test", "DIRECT"},
  {"FINAL", "DIRECT"},
}
