-- Imported by `chute import` from config.yaml.
-- What chute cannot do as the file says, and what was done instead:
--   config.yaml:10: tun: stack system: chute has one stack (lwIP): ignored
--   config.yaml:25: proxy provider 'airport': health-check: chute checks through the groups that use it (their url and interval): ignored
--   config.yaml:35: group 'Relay': chute has no relay groups: left out
--   config.yaml:40: group 'Final': member 'Auto' is a group, and chute's groups hold proxies only: its 0 members and its providers are listed in its place
--   config.yaml:56: rule provider 'binary': format mrs (binary) is not a list chute reads: left out, and the rules that name it
--   config.yaml:64: RULE-SET binary: no rule provider chute imported by that name: left out
--   config.yaml:69: chute cannot evaluate SUB-RULE rules (SUB-RULE,(NETWORK,tcp)): left out
--   config.yaml:70: 1 rule names policy 'Relay', which chute does not have: left out (flows go on to the rules below)
local chute = require "chute"

chute.config {
  listen = { mixed = { address = "0.0.0.0:7890", users = { alice = "pw1" } } },
  tun = { auto_route = true, name = "utun7", mtu = 9000 },
  dns = { hijack = true },
}

chute.provider "airport" { url = "http://sub.example.invalid/clash?token=abc", interval = 3600, path = "./providers/airport.yaml", filter = "HK|JP" }

chute.group "Auto" { type = "url-test", use = { "airport" }, url = "http://www.gstatic.com/generate_204", interval = 300 }
chute.group "Final" { type = "select", proxies = { "DIRECT" }, use = { "airport" } }

local rs = {}
rs["reject"] = chute.ruleset { url = "http://rules.example.invalid/reject.txt", format = "domain", interval = 86400, path = "./ruleset/reject.yaml" }
rs["cncidr"] = chute.ruleset { url = "http://rules.example.invalid/cncidr.txt", format = "ipcidr", interval = 86400, path = "./ruleset/cncidr.txt" }

chute.route = chute.rules {
  { "RULE-SET", rs["reject"], "REJECT" },
  { "GEOSITE", "category-ads-all", "REJECT" },
  { "RULE-SET", rs["cncidr"], "DIRECT", "no-resolve" },
  { "GEOIP", "LAN", "DIRECT", "no-resolve" },
  { "GEOIP", "CN", "DIRECT" },
  { "FINAL", "Final" },
}
