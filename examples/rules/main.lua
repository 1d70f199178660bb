-- Rule lists users already have, loaded once into C matchers (a Surge
-- RULE-SET, a Clash domain provider in YAML, a Clash ipcidr provider as
-- text), and a Surge/Clash-style rule list compiled by chute.rules: first
-- match wins; `chute route examples/rules HOST` names the deciding rule.
local chute = require "chute"

chute.config {
  listen = { socks = "127.0.0.1:1080", http = "127.0.0.1:8080" },
}

local ads = chute.ruleset "rules/ads.list"
local direct = chute.ruleset("rules/direct.yaml", { format = "domain" })
local lan = chute.ruleset("rules/lan.txt", { format = "ipcidr" })

chute.route = chute.rules {
  { "RULE-SET", ads, "REJECT" },
  { "RULE-SET", direct, "DIRECT" },
  { "RULE-SET", lan, "DIRECT", "no-resolve" }, -- names skip its CIDRs, as in Clash
  { "AND", { { "NETWORK", "tcp" }, { "DST-PORT", "25" } }, "REJECT" }, -- no SMTP out
  -- A Lua function is a rule too: nil goes on to the next one.
  function(flow)
    if flow.host and flow.host:sub(-6) == ".onion" then return "REJECT" end
  end,
  { "FINAL", "DIRECT" },
}
