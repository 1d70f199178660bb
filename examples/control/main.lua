-- The control API and the built-in dashboard: SOCKS5 on 127.0.0.1:1080,
-- the API on 127.0.0.1:9090 (open http://127.0.0.1:9090/ui/?token=change-me).
-- Clash dashboards (yacd, metacubexd, zashboard) work against it too: give
-- them http://127.0.0.1:9090 and the secret; set cors to their origin.
local chute = require "chute"

chute.config {
  log_level = "info",
  listen = { socks = "127.0.0.1:1080" },
  control = {
    listen = "127.0.0.1:9090",
    secret = "change-me",      -- required as "Authorization: Bearer ..." or ?token=
    -- cors = "*",             -- for a dashboard served from another origin
  },
}

-- A select group the dashboard (or `chute ctl select out REJECT`) switches.
chute.group "out" { type = "select", proxies = { "DIRECT", "REJECT" } }

function chute.route(flow)
  return "out"
end
