local chute = require "chute"
chute.route = chute.rules {
  {"DOMAIN", "a.test", "REJECT"},
  { "IP-CIDR", "10.0.0.0/8",
    "DIRECT" },
  {"DOMAIN-SUFFIX", "example.com"},
  {"FINAL", "DIRECT"},
}
