-- chute's DNS server for this machine, without root: fake-IP answers on
-- 127.0.0.1:5353 (UDP and TCP), with an on_dns hook that blocks and maps
-- names, and the SOCKS5 / HTTP proxies a client uses to come back with the
-- fake IPs it was given (chute turns them back into names).
--   build/chute run examples/dns
--   dig @127.0.0.1 -p 5353 example.com          -> 198.18.x.y, TTL 1
--   dig @127.0.0.1 -p 5353 ads.example          -> NXDOMAIN (on_dns)
-- See README.md beside this file; the TUN variant is at the end.
local chute = require "chute"

chute.config {
  log_level = "info",
  listen = {
    socks = "127.0.0.1:1080",
    http = "127.0.0.1:8080",
  },
  dns = {
    mode = "fake-ip",                -- or "real-ip": forwarded, cached, IP -> name remembered
    listen = "127.0.0.1:5353",       -- port 53 needs root (or CAP_NET_BIND_SERVICE)
    fake_ip_range = "198.18.0.0/16", -- reserved for benchmarking (RFC 2544): no real host there
    fake_ip_ttl = 1,                 -- clients ask again soon, so a recycled address is never stale
    -- upstream = { "9.9.9.9", "1.1.1.1:53" },  -- default: /etc/resolv.conf's nameservers
    -- Names answered for real (this list replaces the built-in one): local
    -- names, reverse lookups, time servers and connectivity probes must see
    -- the real network.
    exclude = {
      "+.lan", "+.local", "+.home.arpa", "+.in-addr.arpa", "+.ip6.arpa",
      "+.ntp.org", "time.google.com", "time.apple.com",
      "captive.apple.com", "connectivitycheck.gstatic.com", "detectportal.firefox.com",
    },
    -- Mappings are saved at exit (and every 30 s) under ~/.local/state/chute
    -- (root: /var/lib/chute), one file per bundle; state_file = "x" moves it.
  },
}

-- Called once per name (then cached until a reload). nil answers as usual,
-- false blocks (NXDOMAIN), "real" asks the upstream even in fake-ip mode, an
-- address or a list of addresses is the answer.
local blocked = { ["ads.example"] = true, ["tracker.example"] = true }
local hosts = {
  ["printer.example"] = "192.168.1.20",
  ["nas.example"] = { "192.168.1.30", "fd00::30" },
}

function chute.on_dns(q)
  if hosts[q.name] then return hosts[q.name] end
  local n = q.name
  while n do -- the name and every parent: ads.example blocks x.ads.example too
    if blocked[n] then return false end
    n = n:match("^[^.]+%.(.+)$")
  end
  if q.name:sub(-8) == ".example" and q.name:find("^real%.") then
    return "real"                -- say, a name whose real address you need
  end
  return nil
end

-- Flows through the proxies; a fake IP arrives with its name as flow.host.
function chute.route(flow)
  return "DIRECT"
end

--[[ The TUN variant (root): capture the machine's traffic, answer every
query to port 53 that enters the TUN, and give flows to fake IPs their name.
Replace chute.config above with:

chute.config {
  tun = {
    name = "chute0",
    address = { "198.19.255.1/30", "fdfe:dcba:9876::1/126" },  -- outside fake_ip_range
    auto_route = true,
    exclude = { "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7" },
  },
  dns = {
    mode = "fake-ip",
    fake_ip_range = "198.18.0.0/16",
    fake_ip_range6 = "fc00::/18",      -- AAAA answers too (else AAAA gets none)
    upstream = { "9.9.9.9" },          -- reached outside the TUN (chute's mark)
    exclude = { "+.lan", "+.local", "+.in-addr.arpa", "+.ip6.arpa", "+.ntp.org" },
  },
}
-- and point /etc/resolv.conf at any address routed into the TUN, e.g.
-- "nameserver 198.18.0.1": chute answers it (dns.hijack, the default).
--]]
