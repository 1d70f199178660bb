local chute = require "chute"
-- A profile's [Rule] section as Surge and mihomo users write it.
chute.route = chute.rules {
  {"USER-AGENT", "Instagram*", "REJECT"},                    -- cannot evaluate: never matches
  {"DOMAIN-WILDCARD", "*.wild.test", "REJECT-TINYGIF"},
  {"DST-PORT", "25/465/587", "REJECT-DROP"},
  {"SRC-PORT", ">=65000", "REJECT"},
  {"PROTOCOL", "QUIC", "REJECT"},                            -- cannot evaluate
  {"IN-TYPE", "HTTPS", "REJECT-NO-DROP"},
  {"DOMAIN-SUFFIX", "a-rather-long-name-for-a-domain-suffix-rule.example", "REJECT"},
  {"IP-CIDR", "10.0.0.0/8", "DIRECT", "no-resolve"},
  {"RULE-SET", "LAN", "REJECT"},
  {"IP-CIDR", "198.18.0.0/15", "REJECT"},
  {"FINAL", "DIRECT"},
}
