local chute = require "chute"
chute.route = chute.rules {
  {"DOMAIN", "a.test", "REJECT"},
  {"FINAL"},
}
