-- The `chute` module a bundle gets from `require "chute"`: configuration
-- with validation and the hooks the engine calls. Loaded once per script
-- state by core/script with the engine's C functions as `...`.
local core = ...

local state = { config = {}, hooks = {}, configured = false }

local function where_error(msg, level)
  error(msg, level + 1)
end

-- |unit| ("seconds"): what a number means, for the hint a "5s" gets.
local function check_type(path, v, want, unit)
  local got = math.type(v) or type(v)
  if want == "size" and (type(v) == "number" or type(v) == "string") then
    return nil -- the check says what a size is
  end
  if want == "number" and type(v) == "number" then
    if v ~= v or v == math.huge or v == -math.huge then
      return string.format("%s: expected a finite number", path)
    end
    return nil
  end
  if got ~= want then
    return core.type_error(path, v, want, unit)
  end
end

-- ": did you mean 'listen'?" when |word| is near one of |names|.
local function did_you_mean(word, names, quote)
  local best = type(word) == "string" and core.suggest(word, names)
  if not best then return "" end
  return quote and string.format(": did you mean '%s'?", best)
    or string.format(": did you mean %s?", best)
end

-- A list of "IP/PREFIX" strings.
local function cidr_list(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  if n ~= #t then return "expected a list of \"IP/PREFIX\" strings" end
  for i, v in ipairs(t) do
    local e = type(v) ~= "string" and "expected a string" or core.check_cidr(v)
    if e then return string.format("[%d]: %s", i, e) end
  end
end

-- A Surge MITM host pattern: "*.example.com", "api.example.net:8443",
-- "-pinned.example.com", "[2001:db8::1]:8443"; '*' and '?' wildcards.
local function mitm_host(v)
  if v == "" or v == "-" then return "empty host pattern" end
  if v:find("[%s%c]") then return string.format("%q: no spaces or control characters", v) end
  local p = v:sub(1, 1) == "-" and v:sub(2) or v
  local host, port
  if p:sub(1, 1) == "[" then
    host, port = p:match("^(%[[^%]]+%])(.*)$")
    if not host then return string.format("%q: an IPv6 literal needs its ']'", v) end
  else
    host, port = p:match("^([^:]*)(.*)$")
  end
  if host == "" then return string.format("%q: no host before the port", v) end
  if port ~= "" then
    local n = port:match("^:(%d+)$")
    n = n and tonumber(n)
    if not n or n < 1 or n > 65535 then
      return string.format("%q: the port must be 1..65535 (\"host:8443\")", v)
    end
  end
end

local function host_list(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  if n ~= #t then return "expected a list of host patterns (\"*.example.com\")" end
  for i, v in ipairs(t) do
    local e = type(v) ~= "string" and "expected a string" or mitm_host(v)
    if e then return string.format("[%d]: %s", i, e) end
  end
end

local function nonempty(v) if v == "" then return "expected a path" end end
-- geo.mmdb = { url = ... }: the keys of a remote GEO file (ranges checked in C).
local geo_remote = {
  url = { type = "string" }, interval = { type = "number", unit = "seconds" },
  via = { type = "string" }, path = { type = "string", check = nonempty },
  max_size = { type = "integer" },
}

-- listen.reverse: { "127.0.0.1:8443 -> https://origin.example[:443]", ... }
local function reverse_list(t)
  for i, v in ipairs(t) do
    if type(v) ~= "string" then return string.format("[%d]: expected a string", i) end
    local addr, host, port = v:match("^%s*(%S+)%s*%->%s*https://([^/:%s%]]+)(:?%d*)/?%s*$")
    if not addr then
      addr, host, port = v:match("^%s*(%S+)%s*%->%s*https://%[([%x:]+)%](:?%d*)/?%s*$")
    end
    if not addr then
      return string.format("[%d]: %q is not \"LISTEN_ADDRESS -> https://HOST[:PORT]\"", i, v)
    end
    local e = core.check_address(addr)
    if e then return string.format("[%d]: %s", i, e) end
    local p = port ~= "" and tonumber(port:sub(2)) or 443
    if not p or p < 1 or p > 65535 then
      return string.format("[%d]: port %s is not 1..65535", i, port:sub(2))
    end
  end
end

-- Schema: key -> type, or a nested schema table; `check` refines a value.
local listener = {
  address = { type = "string", check = core.check_address },
  users = { type = "table", check = function(t)
    for u, p in pairs(t) do
      if type(u) ~= "string" or type(p) ~= "string" then
        return "expected { name = \"password\" } strings"
      end
      if #u == 0 or #u > 255 or #p > 255 then
        return "names 1..255 bytes, passwords up to 255 bytes"
      end
    end
  end },
}

local schema = {
  log_level = { type = "string", check = function(v)
    if v ~= "error" and v ~= "warn" and v ~= "info" and v ~= "debug" then
      return string.format("%q is not one of error, warn, info, debug%s", v,
        did_you_mean(v, { "error", "warn", "info", "debug" }, true))
    end
  end },
  log_format = { type = "string", check = function(v)
    if v ~= "text" and v ~= "json" then return string.format("%q is not text or json", v) end
  end },
  log_file = { type = "string", check = nonempty },
  fallback = { type = "string" }, -- a policy name; checked once proxies are all declared
  listen = { fields = { socks = { fields = listener }, http = { fields = listener },
                        mixed = { fields = listener },
                        reverse = { type = "table", check = reverse_list } } },
  timeouts = { fields = {
    connect = { type = "number", unit = "seconds", check = function(v) if v <= 0 then return "must be > 0" end end },
    idle = { type = "number", unit = "seconds", check = function(v) if v <= 0 then return "must be > 0" end end },
    udp = { type = "number", unit = "seconds", check = function(v) if v <= 0 then return "must be > 0" end end },
  } },
  tun = { fields = {
    name = { type = "string", check = function(v)
      if #v == 0 or #v > 15 then return "interface names are 1..15 bytes" end
    end },
    address = { type = "table", check = function(t) return cidr_list(t) end },
    mtu = { type = "integer", check = function(v)
      if v < 1280 or v > 65535 then return "must be 1280..65535" end
    end },
    batch = { type = "integer", check = function(v)
      if v < 1 or v > 256 then return "must be 1..256" end
    end },
    auto_route = { type = "boolean" },
    offload = { type = "boolean" },
    exclude = { type = "table", check = function(t) return cidr_list(t) end },
  } },
  outbound = { fields = {
    interface = { type = "string", check = function(v)
      if #v == 0 or #v > 15 then return "interface names are 1..15 bytes" end
    end },
    fwmark = { type = "integer", check = function(v)
      if v < 1 or v > 0xffffffff then return "must be 1..0xffffffff" end
    end },
  } },
  dns = { fields = {
    mode = { type = "string", check = function(v)
      if v ~= "fake-ip" and v ~= "real-ip" then
        return string.format("%q is not fake-ip or real-ip%s", v, did_you_mean(v, { "fake-ip", "real-ip" }, true))
      end
    end },
    fake_ip_range = { type = "string", check = function(v) return core.check_range(v, 4) end },
    fake_ip_range6 = { type = "string", check = function(v) return core.check_range(v, 6) end },
    fake_ip_ttl = { type = "integer", unit = "seconds", check = function(v)
      if v < 1 or v > 86400 then return "must be 1..86400 seconds" end
    end },
    fake_ip_size = { type = "integer", check = function(v)
      if v < 16 or v > 16777216 then return "must be 16..16777216 mappings" end
    end },
    state_file = { type = "string" },
    persist = { type = "boolean" },
    upstream = { type = "table", check = function(t)
      if #t == 0 or #t > 8 then return "expected 1..8 addresses (\"IP\" or \"IP:PORT\")" end
      for i, v in ipairs(t) do
        local e = type(v) ~= "string" and "expected a string" or core.check_upstream(v)
        if e then return string.format("[%d]: %s", i, e) end
      end
    end },
    exclude = { type = "table", check = function(t)
      for i, v in ipairs(t) do
        if type(v) ~= "string" or #v == 0 then return string.format("[%d]: expected a name", i) end
      end
    end },
    listen = { type = "string", check = core.check_address },
    timeout = { type = "number", unit = "seconds", check = function(v)
      if v <= 0 or v > 30 then return "must be > 0 and at most 30 seconds" end
    end },
    cache = { type = "integer", check = function(v)
      if v < 0 or v > 1000000 then return "must be 0..1000000 entries (0 turns it off)" end
    end },
    hijack = { type = "boolean" },
  } },
  mitm = { fields = {
    hosts = { type = "table", check = host_list },
    skip_verify_hosts = { type = "table", check = host_list },
    ca = { type = "string", check = nonempty },
    ca_key = { type = "string", check = nonempty },
    auto_bypass = { type = "boolean" },
    bypass_seconds = { type = "number", unit = "seconds", check = function(v)
      if v <= 0 or v > 86400 then return "must be > 0 and at most 86400 seconds" end
    end },
    block_quic = { type = "boolean" },
    max_body = { type = "integer", check = function(v)
      if v < 1 or v > 16777216 then return "must be 1..16777216 bytes" end
    end },
    max_buffered = { type = "integer", check = function(v)
      if v < 262144 or v > 17179869184 then return "must be 262144..17179869184 bytes (256 KiB..16 GiB)" end
    end },
  } },
  control = { fields = {
    listen = { type = "string", check = core.check_address },
    secret = { type = "string", check = function(v)
      if #v == 0 or #v > 255 then return "1..255 bytes" end
    end },
    cors = { type = "string", check = function(v)
      if #v == 0 or #v > 255 or v:find("[\r\n]") then return "an origin (\"*\", \"http://host:port\"), 1..255 bytes" end
    end },
  } },
  -- GEOIP / IP-ASN / GEOSITE files (core/script/geo.c); keys as mihomo's geox-url
  -- (each a file's path, or { url = ... }: fetched and kept fresh, geo_remote.c)
  geo = { fields = {
    mmdb = { or_string = nonempty, fields = geo_remote },
    asn = { or_string = nonempty, fields = geo_remote },
    geosite = { or_string = nonempty, fields = geo_remote },
  } },
  budget = { type = "integer", check = function(v)
    if v < 1000 or v > 1000000000 then return "must be 1000..1000000000 instructions" end
  end },
  decision_cache = { type = "integer", check = function(v)
    if v < 0 or v > 1000000 then return "must be 0..1000000 entries (0 turns it off)" end
  end },
  lua_memory_mb = { type = "integer", check = function(v)
    if v < 1 or v > 65536 then return "must be 1..65536" end
  end },
  -- what the engine stays within: "15M", "50 MiB", or bytes (README "Memory limit")
  memory_limit = { type = "size", check = core.check_size },
}

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

-- The error and the path of the key it is about (for the key's line).
local function validate(path, fields, t)
  if type(t) ~= "table" then
    return core.type_error(path, t, "table"), path
  end
  for k, v in pairs(t) do
    local name = path == "" and tostring(k) or (path .. "." .. tostring(k))
    local spec = type(k) == "string" and fields[k]
    if not spec then
      local known = sorted_keys(fields)
      return string.format("unknown key '%s'%s (known: %s)", name, did_you_mean(k, known, true),
        table.concat(known, ", ")), name
    end
    local e, at
    if spec.or_string and type(v) == "string" then
      local ce = spec.or_string(v)
      if ce then e = name .. ": " .. ce end
    elseif spec.fields then
      e, at = validate(name, spec.fields, v)
    else
      e = check_type(name, v, spec.type, spec.unit)
      if not e and spec.check then
        local ce = spec.check(v)
        if ce then e = name .. ": " .. ce end
      end
    end
    if e then return e, at or name end
  end
end

-- listen = { socks = "127.0.0.1:1080" } is shorthand for { address = ... }.
-- tun.address and tun.exclude may be one string for a one-entry list.
local function expand_shorthands(cfg)
  if type(cfg.listen) == "table" then
    for k, v in pairs(cfg.listen) do
      if k == "reverse" then
        if type(v) == "string" then cfg.listen.reverse = { v } end
      elseif type(v) == "string" then
        cfg.listen[k] = { address = v }
      end
    end
  end
  if type(cfg.mitm) == "table" then
    for _, k in ipairs { "hosts", "skip_verify_hosts" } do
      if type(cfg.mitm[k]) == "string" then cfg.mitm[k] = { cfg.mitm[k] } end
    end
  end
  if type(cfg.dns) == "table" and type(cfg.dns.upstream) == "string" then
    cfg.dns.upstream = { cfg.dns.upstream }
  end
  if type(cfg.tun) == "table" then
    for _, k in ipairs { "address", "exclude" } do
      if type(cfg.tun[k]) == "string" then cfg.tun[k] = { cfg.tun[k] } end
    end
  end
end

local M = {}

--- Sets the bundle's configuration (see lua/meta/chute.lua).
function M.config(t)
  if state.configured then where_error("chute.config: called twice", 2) end
  if type(t) ~= "table" then where_error("chute.config: expected a table", 2) end
  expand_shorthands(t)
  local e, at = validate("", schema, t)
  if not e and type(t.listen) == "table" then
    for name, l in pairs(t.listen) do
      if name ~= "reverse" and l.address == nil then
        e = string.format("listen.%s: needs an address", name)
        at = "listen." .. name
      end
    end
  end
  if e then
    -- The key's own line when the source shows it, else the call's.
    local where = at and core.key_where(at) or ""
    if where == "" then where_error("chute.config: " .. e, 2) end
    error(where .. "chute.config: " .. e, 0)
  end
  state.config = t
  state.configured = true
  -- "main.lua:3: ", for what can only be checked once main.lua has run
  state.config_where = select(2, pcall(error, "", 3))
  state.config_source, state.config_short, state.config_line = core.call_site(2)
end

M.log = core.log
M.ruleset = core.ruleset
M.module = core.module
M.rules = core.rules
M.clash = core.clash
M.surge = core.surge
M.version = core.version
M.select = core.select
M.on_request = core.on_request
M.on_response = core.on_response
M.respond = core.respond
M.redirect = core.redirect
M.reject = core.reject

--- chute.proxy "name" { type = ..., server = ..., port = ..., ... }
function M.proxy(name)
  if type(name) ~= "string" then where_error("chute.proxy: expected a name string", 2) end
  return function(t) core.proxy(name, t) end
end

--- chute.provider "name" { url = ..., interval = 3600, via = "DIRECT", filter = "regex", path = ... }
function M.provider(name)
  if type(name) ~= "string" then where_error("chute.provider: expected a name string", 2) end
  return function(t) core.provider(name, t) end
end

--- chute.group "name" { type = "select"|"fallback"|"url-test"|"load-balance", proxies = {...} }
function M.group(name)
  if type(name) ~= "string" then where_error("chute.group: expected a name string", 2) end
  return function(t) core.group(name, t) end
end

local hook_names = { route = true, on_dns = true }
-- Registered by a call (a pattern and options), not by assignment.
local called_hooks = { on_request = true, on_response = true }

local proxy = setmetatable({}, {
  __index = function(_, k)
    if hook_names[k] then return state.hooks[k] end
    return M[k]
  end,
  __newindex = function(_, k, v)
    if called_hooks[k] then
      where_error(string.format("chute.%s is called, not assigned: chute.%s(pattern, "
        .. "function(req) ... end [, opts])", k, k), 2)
    end
    if not hook_names[k] then
      local near = did_you_mean(k, { "on_dns", "route", "on_request", "on_response" })
      where_error(string.format("chute.%s: unknown hook%s (hooks: on_dns, route)",
        tostring(k), near ~= "" and near:gsub("mean ", "mean chute.") or ""), 2)
    end
    if type(v) ~= "function" then
      where_error(string.format("chute.%s: expected a function, got %s", k, type(v)), 2)
    end
    state.hooks[k] = v
  end,
  __metatable = false,
})

return proxy, state
