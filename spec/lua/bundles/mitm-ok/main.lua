-- Every mitm key, a CA in the bundle (its key found beside it), and hooks.
local chute = require "chute"

chute.config { listen = { socks = "127.0.0.1:0" }, mitm = {
  hosts = { "*.example.com", "api.example.net:8443", "-pinned.example.com" },
  ca = "certs/ca.pem",
  skip_verify_hosts = { "self-signed.example.com" },
  auto_bypass = true, bypass_seconds = 60, block_quic = false, max_body = 65536,
} }
chute.on_request([[^https://api\.example\.com/]], function(req)
  req.headers["X-Debug"] = "1"
  if req.path:find("^/ads/") then return chute.respond(204) end
end, { method = { "GET", "POST" } })
chute.on_response([[^https://api\.example\.com/]], function(resp, req)
  resp.headers["X-Seen"] = req.path
end, { body = true, max_body = 4096 })
function chute.route(flow)
  if flow.host == "plain.example.com" then return "DIRECT", { mitm = false } end
  return "DIRECT"
end
