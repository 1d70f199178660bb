-- The end of a mihomo profile as users write it: GEOSITE names from a v2ray
-- geosite.dat, GEOIP,LAN and GEOIP,CN from a country .mmdb, an IP-ASN rule,
-- the rest through a proxy group. `chute route examples/geo HOST` names the
-- deciding rule.
--
-- Country.mmdb and GeoSite.dat here are tiny synthetic stand-ins, so the
-- bundle runs as it is (made with spec/fixtures/geo/mkmmdb.py and
-- mkgeosite.py; see spec/lua/75-geo.sh). Put your own files in their place:
-- the ones mihomo's geox-url "mmdb" and "geosite" fetch (MaxMind/GeoLite2,
-- sing-geoip, Meta-geoip0 and ip-location-db mmdb schemas are read), and a
-- GeoLite2-ASN.mmdb for IP-ASN.
local chute = require "chute"

chute.config {
  listen = { socks = "127.0.0.1:1080", http = "127.0.0.1:8080" },
  -- mihomo's names; relative to the bundle, or absolute. Only the GEOSITE
  -- names the rules use are compiled, however large the file.
  geo = { mmdb = "Country.mmdb", geosite = "GeoSite.dat" },
}

chute.proxy "ss" {
  type = "shadowsocks", server = "127.0.0.1", port = 8388,
  cipher = "aes-128-gcm", password = "example-password",
}
chute.group "proxy" { type = "fallback", proxies = { "ss", "DIRECT" } }

chute.route = chute.rules {
  { "GEOSITE", "category-ads-all", "REJECT" },
  { "GEOSITE", "cn", "DIRECT" },
  { "GEOIP", "LAN", "DIRECT", "no-resolve" }, -- private ranges, no file needed
  { "GEOIP", "CN", "DIRECT" },                -- a name resolves for it first
  { "FINAL", "proxy" },
}
