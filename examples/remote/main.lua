-- A proxy provider and a remote rule set, kept fresh in the background.
-- SOCKS5 on 127.0.0.1:1080 and HTTP on 127.0.0.1:8080 (no root needed).
--
-- Nothing here touches the network at start: each remote list loads from
-- its cache in chute's state folder ($CHUTE_STATE_DIR, else
-- ~/.local/state/chute/cache/). On a first start there is none yet: the
-- rule set is empty, the provider has no proxies, and the group still has
-- DIRECT, so the bundle runs as it is, offline too. The fetches happen on
-- the loop in the background; each good one replaces the cache and
-- reloads the bundle (as SIGHUP does); a failed one, or a list that does
-- not parse, keeps what was there. `chute update examples/remote` fetches
-- everything once and exits (1 if any failed).
local chute = require "chute"

chute.config {
  log_level = "info",
  fallback = "DIRECT",
  listen = {
    socks = "127.0.0.1:1080",
    http = "127.0.0.1:8080",
  },
}

-- A subscription: a Clash proxies: list, base64 of share links, or share
-- links one a line (ss://, trojan://, socks5://, http(s)://). Its proxies
-- are named as the subscription names them ("hk", "hk 2" for a second
-- "hk"); filter keeps those whose name matches.
chute.provider "sub" {
  url = "https://sub.example.com/clash.yaml",
  interval = 3600,          -- seconds between fetches
  via = "DIRECT",           -- the policy the fetch goes through
  filter = "^(hk|jp)",      -- a PCRE2 regular expression on the names
}

-- A rule list fetched daily (format as chute.ruleset "file" takes it);
-- its cache is <state>/cache/rules/ads.list.
local ads = chute.ruleset {
  url = "https://rules.example.com/ads.list",
  format = "surge",
  interval = 86400,
  path = "rules/ads.list",
}

-- The provider's proxies, then DIRECT; chute.select or the control API
-- picks another member.
chute.group "proxy" { type = "select", proxies = { "DIRECT" }, use = { "sub" } }

function chute.route(flow)
  if ads:match(flow) then return "REJECT" end
  return "proxy"
end
