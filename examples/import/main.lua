-- A Clash config run as it is (config.yaml: proxies, groups, rule
-- providers, rules), with Lua around it. `chute import config.yaml -o DIR`
-- would write the same thing out as a main.lua instead.
local chute = require "chute"

-- This bundle's own listeners and log; config.yaml's mixed-port is not used
-- (config = false).
chute.config {
  log_level = "info",
  listen = { socks = "127.0.0.1:1080", http = "127.0.0.1:8080" },
}

-- Declares config.yaml's proxies, groups and rule lists; returns its rules
-- as a route function (route = false: this bundle writes chute.route).
local clash = chute.clash("config.yaml", { config = false, route = false })

function chute.route(flow)
  if flow.host and flow.host:find("%.corp%.example$") then
    return "DIRECT" -- the office, whatever the Clash rules say
  end
  return clash(flow)
end
