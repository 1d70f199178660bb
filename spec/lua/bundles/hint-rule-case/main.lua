local chute = require "chute"
chute.route = chute.rules {
  {"DOMAIN", "a.test", "REJECT"},
  {"DOMAIN-SUFFIX", "b.test", "direct"},
  {"FINAL", "DIRECT"},
}
