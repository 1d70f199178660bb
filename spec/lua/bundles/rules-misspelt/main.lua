local chute = require "chute"
chute.route = chute.rules {
  {"IP-CIDR", "10.0.0.0/8", "DIRECT", "no-reslove"},
  {"FINAL", "DIRECT"},
}
