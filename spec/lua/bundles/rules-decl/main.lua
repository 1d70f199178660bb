local chute = require "chute"
local ads = chute.ruleset("lists/ads.list")
chute.route = chute.rules {
  {"DOMAIN", "exact.test", "REJECT"},
  {"DOMAIN-SUFFIX", "direct.test", "DIRECT"},
  {"DOMAIN-SUFFIX", "b.direct.test", "REJECT"},          -- shadowed by rule 2: first match wins
  {"DST-PORT", "22", "REJECT"},
  {"DOMAIN-KEYWORD", "tracker", "REJECT"},
  {"RULE-SET", ads, "REJECT"},
  {"AND", {{"NETWORK", "udp"}, {"DST-PORT", "443"}}, "REJECT"},
  {"NOT", {{"DST-PORT", "1-1024"}}, "DIRECT"},
  {"IP-CIDR", "10.0.0.0/8", "DIRECT", "no-resolve"},
  {"IP-CIDR", "10.1.0.0/16", "REJECT", "no-resolve"},     -- shadowed by rule 9
  {"IP-CIDR6", "2001:db8::/32", "REJECT", "no-resolve"},
  function(flow) if flow.host == "fn.test" then return "REJECT" end end,
  {"DOMAIN-REGEX", "^re[0-9]+\\.test$", "REJECT"},
  {"FINAL", "DIRECT"},
}
