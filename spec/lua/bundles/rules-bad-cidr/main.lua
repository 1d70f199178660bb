local chute = require "chute"
chute.route = chute.rules {
  {"DOMAIN", "a.test", "DIRECT"},
  {"IP-CIDR", "10.0.0.0/33", "DIRECT"},
  {"FINAL", "DIRECT"},
}
