-- Proxies and a policy group: SOCKS5 on 127.0.0.1:1080 and HTTP on
-- 127.0.0.1:8080 (no root needed), a Shadowsocks server, and a fallback
-- group that uses it while it answers and goes DIRECT when it does not.
-- Names in PROXIED (and their subdomains) take the group; the rest goes
-- DIRECT. Runs as is: without the Shadowsocks server the group is DIRECT.
local chute = require "chute"

chute.config {
  log_level = "info",
  fallback = "DIRECT",
  listen = {
    socks = "127.0.0.1:1080",
    http = "127.0.0.1:8080",
  },
  timeouts = { connect = 5, idle = 300 },
}

-- A local ss-server to try it with:
--   ss-server -s 127.0.0.1 -p 8388 -m aes-128-gcm -k example-password -u
chute.proxy "ss" {
  type = "shadowsocks",
  server = "127.0.0.1",
  port = 8388,
  cipher = "aes-128-gcm",
  password = "example-password",
}

-- The first member that passes its health check (an HTTP GET of `url`
-- through it, every `interval` seconds) carries the flows; a member whose
-- connection fails is skipped at once until it checks healthy again.
chute.group "proxied" {
  type = "fallback",
  proxies = { "ss", "DIRECT" },
  url = "http://www.gstatic.com/generate_204",
  interval = 60,
  timeout = 3,
}

-- Destinations for the group: a name matches itself and its subdomains;
-- an IP address matches exactly.
local PROXIED = {
  "example.com",
  "example.org",
}

local function listed(flow)
  local host = flow.host
  for _, name in ipairs(PROXIED) do
    if flow.dst_ip == name then return true end
    if host and (host == name or host:sub(-(#name + 1)) == "." .. name) then
      return true
    end
  end
  return false
end

function chute.route(flow)
  if listed(flow) then return "proxied" end
  return "DIRECT"
end
