-- Rule lists users already have, loaded once into C matchers: a Surge
-- RULE-SET, a Clash domain provider (YAML) and a Clash ipcidr provider
-- (text). route() asks each set in turn; a set answers true and the line
-- that matched.
local chute = require "chute"

chute.config {
  listen = { socks = "127.0.0.1:1080", http = "127.0.0.1:8080" },
}

local ads = chute.ruleset "rules/ads.list"
local direct = chute.ruleset("rules/direct.yaml", { format = "domain" })
local lan = chute.ruleset("rules/lan.txt", { format = "ipcidr" })

function chute.route(flow)
  if ads:match(flow) then return "REJECT" end
  if direct:match(flow) or lan:match(flow) then return "DIRECT" end
  return "DIRECT" -- a proxy, once chute has them
end
