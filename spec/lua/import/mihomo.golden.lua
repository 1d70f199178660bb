-- Imported by `chute import` from config.yaml.
-- What chute cannot do as the file says, and what was done instead:
--   config.yaml:8: config: 'ipv6' is not supported by chute: ignored
--   config.yaml:20: dns: nameserver https://doh.pub/dns-query: chute asks plain DNS servers (IP or IP:PORT, up to 8): left out
--   config.yaml:37: proxy 'us-vmess': chute has no vmess protocol: left out
--   config.yaml:56: proxy provider 'backup': health-check: chute checks through the groups that list its proxies (their url and interval): ignored
--   config.yaml:63: group 'Proxy': member 'auto' is a group, and chute's groups hold proxies only: its 3 members are listed in its place
--   config.yaml:63: group 'Proxy': member 'us-vmess' is not a proxy chute imported: left out
--   config.yaml:75: group 'Streaming': chute's health checks speak plain HTTP: url https://www.gstatic.com/generate_204 is checked as http://www.gstatic.com/generate_204
--   config.yaml:99: 1 rule names policy 'us-vmess', which chute does not have: left out (flows go on to the rules below)
--   ./providers/backup.yaml:14: proxy 'sg-hy2': chute has no hysteria2 protocol: left out
local chute = require "chute"

chute.config {
  log_level = "info",
  control = { listen = "127.0.0.1:9090" },
  listen = { socks = "127.0.0.1:7891", http = "127.0.0.1:7890" },
  dns = { mode = "fake-ip", fake_ip_range = "198.18.0.1/16", listen = "127.0.0.1:1053", exclude = { "+.lan", "+.local" }, upstream = { "223.5.5.5" } },
}

chute.proxy "hk-ss" { type = "shadowsocks", server = "203.0.113.10", port = 8388, cipher = "aes-128-gcm", password = "hk-secret", udp = true }
chute.proxy "jp-trojan" { type = "trojan", server = "jp.example.net", port = 443, password = "jp-secret", sni = "jp.example.net" }
chute.proxy "home-socks" { type = "socks5", server = "192.0.2.50", port = 1080, username = "me", password = "pw" }
chute.proxy "sg-ss" { type = "shadowsocks", server = "198.51.100.20", port = 8389, cipher = "chacha20-ietf-poly1305", password = "sg-secret" }
chute.proxy "de-ss" { type = "shadowsocks", server = "198.51.100.21", port = 8389, cipher = "aes-256-gcm", password = "de-secret" }

chute.group "Proxy" { type = "select", proxies = { "hk-ss", "jp-trojan", "sg-ss", "DIRECT" } }
chute.group "auto" { type = "url-test", proxies = { "hk-ss", "jp-trojan", "sg-ss" }, url = "http://www.gstatic.com/generate_204", interval = 300, tolerance = 50 }
chute.group "Streaming" { type = "fallback", proxies = { "jp-trojan", "hk-ss" }, url = "http://www.gstatic.com/generate_204", interval = 600, timeout = 3 }

local rs = {}
rs["ads"] = chute.ruleset("rules/ads.yaml", { format = "domain" })
rs["lan"] = chute.ruleset("rules/lan.txt", { format = "ipcidr" })

chute.route = chute.rules {
  { "DOMAIN", "ads.example.com", "REJECT" },
  { "RULE-SET", rs["ads"], "REJECT" },
  { "DOMAIN-SUFFIX", "netflix.com", "Streaming" },
  { "DOMAIN-SUFFIX", "nflxvideo.net", "Streaming" },
  { "DOMAIN-KEYWORD", "google", "Proxy" },
  { "DOMAIN-SUFFIX", "github.com", "auto" },
  { "DOMAIN-SUFFIX", "cn", "DIRECT" },
  { "DOMAIN-SUFFIX", "home.arpa", "home-socks" },
  { "AND", { { "DOMAIN-SUFFIX", "game.example" }, { "NETWORK", "UDP" } }, "DIRECT" },
  { "DST-PORT", "22", "REJECT" },
  { "RULE-SET", rs["lan"], "DIRECT", "no-resolve" },
  { "IP-CIDR", "203.0.113.0/24", "Proxy", "no-resolve" },
  { "IP-CIDR6", "2001:db8::/32", "auto", "no-resolve" },
  { "SRC-IP-CIDR", "10.99.0.0/16", "REJECT" },
  { "PROCESS-NAME", "curl", "DIRECT" },
  { "GEOIP", "CN", "DIRECT" },
  { "FINAL", "Proxy" },
}
