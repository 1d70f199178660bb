---@meta chute
-- LuaLS type stubs for the `chute` module: point your editor's Lua language
-- server at this folder (workspace.library = { "<chute>/lua/meta" }) to get
-- completion and type checks in bundles. Declarations only: never run.

---@class chute
local chute = {}

---@alias chute.policy "DIRECT"|"REJECT"|string

---@class chute.listener
---@field address string  IP:PORT, e.g. "127.0.0.1:1080" or "[::1]:1080"
---@field users? table<string, string>  name -> password; SOCKS5 RFC 1929 or HTTP Basic

---@class chute.config.listen
---@field socks? string|chute.listener  SOCKS5 listener (no root needed)
---@field http? string|chute.listener   HTTP proxy listener: CONNECT and absolute-URI forwarding

---@class chute.config.timeouts
---@field connect? number  seconds to connect upstream, and to finish a proxy handshake (default 10)
---@field idle? number     seconds without a byte before a flow is closed (default 300)
---@field udp? number      seconds a UDP mapping lives without traffic (default 60)

---@class chute.config.tun
---@field name? string           device name, created if missing, attached if it exists (default "chute0")
---@field address? string|string[]  "IP/PREFIX" addresses given to the device
---@field mtu? integer           1280..65535; lwIP's MSS follows it (default: the device's)
---@field batch? integer         packets drained per read batch, 1..256 (default 64)
---@field auto_route? boolean    route everything without chute's mark through the TUN (default false)
---@field exclude? string|string[]  "IP/PREFIX" kept on the main routing table (with auto_route)
---@field offload? boolean       TCP segmentation offload with the kernel (default true)

---@class chute.config.outbound
---@field interface? string      upstream sockets bind to this device (SO_BINDTODEVICE)
---@field fwmark? integer        upstream sockets carry this mark (default 0x2022 with auto_route)

---@class chute.config
---@field log_level? "error"|"warn"|"info"|"debug"  default "info"; `chute run --log-level` wins
---@field fallback? chute.policy  policy when route() fails, overruns or names no known policy (default "DIRECT")
---@field listen? chute.config.listen
---@field timeouts? chute.config.timeouts
---@field tun? chute.config.tun  capture a machine's traffic on a TUN device (root)
---@field outbound? chute.config.outbound
---@field decision_cache? integer  entries of the per-destination decision cache, 0 off (default 4096)
---@field budget? integer  Lua instructions per route() call (default 100000, at least 1000)
---@field lua_memory_mb? integer  memory cap of the script state (default 64)

--- Sets the bundle's configuration. Call it once, from main.lua; an unknown
--- key or a wrong type stops the bundle from loading with file:line.
---@param t chute.config
function chute.config(t) end

---@class chute.flow
---@field id integer                   the flow's number in logs
---@field network "tcp"|"udp"
---@field inbound "socks"|"http"|"tun"
---@field src_ip string                the client's address
---@field src_port integer
---@field dst_ip string?               the destination when it is an IP literal
---@field dst_port integer
---@field host string?                 the destination name when the client gave one, or (TUN) the TLS SNI / HTTP Host of its first bytes
---@field process_name string?         the local process behind the client's socket (Linux; looked up when read)
---@field process_path string?         its executable's path
---@field uid integer?                 the socket owner's uid

--- Called once per new flow; returns the policy the flow takes. Returning
--- nil gives the fallback. Runs under the instruction budget; an error or an
--- overrun is logged with file:line and the flow gets the fallback.
--- The flow is valid only during the call: copy fields you want to keep.
---@type fun(flow: chute.flow): chute.policy?
chute.route = nil

---@class chute.ruleset
local ruleset = {}

--- Whether any entry of the list matches the flow, and on which line.
---@param flow chute.flow
---@return boolean matched
---@return integer? line
function ruleset:match(flow) end

---@class chute.ruleset.options
---@field format? "auto"|"surge"|"domain-set"|"classical"|"domain"|"ipcidr"
---@field skip_invalid? boolean  leave out (and count) lines that cannot be used, instead of failing

--- Loads a rule list from the bundle into C matchers (at load time).
---@param path string  relative to the bundle
---@param opts? chute.ruleset.options
---@return chute.ruleset
function chute.ruleset(path, opts) end

--- Compiles a Surge/Clash-style rule list into a route function. Each rule is
--- {TYPE, VALUE, POLICY [, "no-resolve"]}, {"RULE-SET", ruleset, POLICY},
--- {"AND"|"OR"|"NOT", {conditions}, POLICY}, a function(flow) returning a
--- policy or nil, or {"FINAL", POLICY} (last). First match wins.
---@param list table
---@return fun(flow: chute.flow): chute.policy?
function chute.rules(list) end

--- Writes a line to chute's log, prefixed with the caller's file:line.
---@param level "error"|"warn"|"info"|"debug"
---@param msg string
function chute.log(level, msg) end

--- chute's version, e.g. "0.1.0".
---@type string
chute.version = ""

return chute
