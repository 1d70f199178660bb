-- GEOIP, SRC-GEOIP, IP-ASN and GEOSITE (spec/lua/75-geo.sh makes the
-- files it names, with spec/fixtures/geo's writers, into a copy of this
-- bundle).
local chute = require "chute"
chute.config { geo = { mmdb = "Country.mmdb", asn = "asn.mmdb", geosite = "geosite.dat" } }
local list = chute.ruleset("geo.list")
chute.route = chute.rules {
  {"GEOSITE", "ads", "REJECT"},
  {"GEOSITE", "google@cn", "DIRECT"},
  {"GEOSITE", "GOOGLE", "REJECT"},
  {"GEOIP", "LAN", "DIRECT", "no-resolve"},
  {"IP-ASN", "13335", "REJECT"},
  {"GEOIP", "cn", "DIRECT"},
  {"GEOIP", "US", "REJECT", "no-resolve"},
  {"AND", {{"SRC-GEOIP", "ZZ"}, {"DST-PORT", "2222"}}, "REJECT"},
  {"RULE-SET", list, "REJECT"},
  {"GEOIP", "ZZ", "REJECT"},
  {"FINAL", "DIRECT"},
}
