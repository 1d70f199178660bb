-- Decrypt and rewrite HTTPS for a few hosts: chute terminates their TLS
-- with certificates it mints from its own CA, runs the Lua hooks and the
-- Surge module below on each request, and forwards it to the origin over
-- TLS (the origin's certificate checked as a browser would). No root:
-- point a client at the SOCKS5 or HTTP proxy and trust chute's CA:
--
--   build/chute run examples/mitm               (makes the CA on first run)
--   build/chute ca export > chute-ca.pem
--   curl --cacert chute-ca.pem -x http://127.0.0.1:8080 https://www.example.com/
--
-- Every other host is relayed untouched, with its own certificate.
local chute = require "chute"

chute.config {
  log_level = "info",
  fallback = "DIRECT",
  listen = {
    socks = "127.0.0.1:1080",
    http = "127.0.0.1:8080",
  },
  mitm = {
    -- Surge's syntax: * and ? wildcards, "-host" excludes, port 443 unless
    -- given. The module's [MITM] hostname line adds its own hosts.
    hosts = { "api.example.net", "-pinned.example.com" },
    auto_bypass = true,   -- a client that refuses our certificate: pass that host through
    max_buffered = 64 * 1024 * 1024, -- h2 body bytes held across all connections (the default)
  },
}

-- Surge module sections as they are: URL/Header/Body Rewrite, Map Local, [MITM].
chute.module "modules/example.sgmodule"

-- C matches the pattern: requests no hook wants never enter Lua.
chute.on_request([[^https://(www|api)\.example\.(com|net)/]], function(req)
  req.headers["x-debug"] = "1"
  if req.path:find("^/ads/") then
    return chute.respond(204)
  end
end)

chute.on_response([[^https://www\.example\.com/]], function(resp, req)
  resp.headers["x-seen-by"] = "chute"
end)

function chute.route(flow)
  return "DIRECT"
end
