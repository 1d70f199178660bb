-- Imported by `chute import` from profile.conf.
-- What chute cannot do as the file says, and what was done instead:
--   profile.conf:4: dns-server system: chute asks plain DNS servers (IP or IP:PORT, up to 8; the system's by default): left out
--   profile.conf:7: [General] skip-proxy is not supported by chute: ignored
--   profile.conf:13: proxy 'SG': chute has no snell protocol: left out
--   profile.conf:14: proxy 'Old': cipher 'rc4-md5' is not one chute has (aes-128-gcm, aes-256-gcm, chacha20-ietf-poly1305): left out
--   profile.conf:17: group 'Proxy': member 'Auto' is a group, and chute's groups hold proxies only: its 2 members are listed in its place
--   profile.conf:17: group 'Proxy': member 'SG' is not a proxy chute imported: left out
--   profile.conf:28: 1 rule names policy 'SG', which chute does not have: left out (flows go on to the rules below)
--   profile.conf:29: chute cannot evaluate USER-AGENT rules (USER-AGENT,Instagram*): left out
--   profile.conf:36: FINAL option 'dns-failed' is not supported by chute: ignored
--   profile.conf:47: section [Host] is not supported by chute: 1 line left out
local chute = require "chute"

chute.config {
  log_level = "info",
  dns = { upstream = { "223.5.5.5", "119.29.29.29" } },
  listen = { http = "127.0.0.1:6152", socks = "127.0.0.1:6153" },
}

chute.proxy "HK" { type = "shadowsocks", server = "203.0.113.10", port = 8388, cipher = "aes-256-gcm", password = "hk-pass", udp = true }
chute.proxy "JP" { type = "trojan", server = "jp.example.net", port = 443, password = "jp-pass", sni = "jp.example.net" }
chute.proxy "Office" { type = "http", server = "192.0.2.80", port = 3128, username = "alice", password = "s3cret" }

chute.group "Proxy" { type = "select", proxies = { "HK", "JP", "DIRECT" } }
chute.group "Auto" { type = "url-test", proxies = { "HK", "JP" }, url = "http://www.gstatic.com/generate_204", interval = 600, tolerance = 100 }
chute.group "Work" { type = "fallback", proxies = { "Office", "DIRECT" }, url = "http://192.0.2.80/health", interval = 60, timeout = 2 }

local rs = {}
rs["rules/reject.list"] = chute.ruleset("rules/reject.list", { format = "surge" })
rs["rules/cdn.txt"] = chute.ruleset("rules/cdn.txt", { format = "domain-set" })

chute.module "profile.sgmodule"

chute.route = chute.rules {
  { "DOMAIN", "ad.example.com", "REJECT" },
  { "RULE-SET", rs["rules/reject.list"], "REJECT-TINYGIF" },
  { "RULE-SET", rs["rules/cdn.txt"], "DIRECT" },
  { "DOMAIN-SUFFIX", "corp.example", "Work" },
  { "DOMAIN-SUFFIX", "youtube.com", "Proxy" },
  { "DOMAIN-KEYWORD", "telegram", "Proxy" },
  { "OR", { { "DOMAIN-SUFFIX", "local.example" }, { "DOMAIN", "printer.example" } }, "DIRECT" },
  { "IP-CIDR", "192.0.2.0/24", "Work", "no-resolve" },
  { "IP-CIDR", "198.51.100.0/24", "Proxy", "no-resolve" },
  { "RULE-SET", "SYSTEM", "DIRECT" },
  { "RULE-SET", "LAN", "DIRECT" },
  { "GEOIP", "CN", "DIRECT" },
  { "FINAL", "Proxy" },
}
