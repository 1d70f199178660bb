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

---@class chute.config.dns
---@field mode? "fake-ip"|"real-ip"  fake-ip (default): A/AAAA answered from a reserved pool, the name kept for the flow; real-ip: forwarded and cached, IP -> name remembered
---@field fake_ip_range? string   default "198.18.0.0/15"
---@field fake_ip_range6? string  an IPv6 pool ("fc00::/18"); none by default (AAAA gets no fake answer)
---@field fake_ip_ttl? integer    seconds on fake answers (default 1)
---@field fake_ip_size? integer   live mappings at most; the least recently used are recycled (default: the range's size)
---@field state_file? string      where mappings persist across restarts (relative to the bundle; default: per bundle under ~/.local/state/chute or /var/lib/chute)
---@field persist? boolean        false: keep no state file
---@field upstream? string|string[]  resolvers, "IP" or "IP:PORT" (default: /etc/resolv.conf's)
---@field exclude? string[]       names answered for real in fake-ip mode: "name", "+.name" / "*.name" (and subdomains); replaces the default list (local names, NTP, captive-portal probes)
---@field listen? string          also serve DNS on this "IP:PORT" (UDP and TCP)
---@field timeout? number         seconds per upstream attempt (default 2)
---@field cache? integer          cached answers (default 4096, 0 off)
---@field hijack? boolean         answer every query to port 53 that enters the TUN (default true)

---@class chute.config
---@field dns? chute.config.dns  the built-in DNS server and the resolver's upstreams
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

---@class chute.dns_query
---@field name string   lower case, no final dot
---@field type string   "A", "AAAA", "HTTPS", "TYPE99"...: the query that asked first (the decision holds for every type)

--- Optional. Called once per name asked of the DNS server (the answer is
--- cached until a reload). Return nil to answer as usual, false or
--- "nxdomain" to block, "real" for a real answer in fake-ip mode, or an
--- address / a list of addresses to answer with.
---@type fun(q: chute.dns_query): (false|string|string[])?
chute.on_dns = nil

---@class chute.proxy
---@field type "socks5"|"http"|"https"|"shadowsocks"|"trojan"
---@field server string          a name or an IP address
---@field port integer
---@field username? string       socks5, http(s)
---@field password? string       socks5, http(s), shadowsocks, trojan
---@field cipher? "aes-128-gcm"|"aes-256-gcm"|"chacha20-ietf-poly1305"  shadowsocks
---@field udp? boolean           UDP flows may use it (shadowsocks, trojan: default true; socks5: UDP ASSOCIATE, default false)
---@field tls? boolean           http: speak TLS to the proxy (same as type "https")
---@field sni? string            trojan, https: the name sent and checked (default: server)
---@field skip_cert_verify? boolean  trojan, https: accept any certificate (warned at load)
---@field ca? string             trojan, https: a PEM file of CA certificates (in the bundle) to check the server against instead of the system's

--- Declares a proxy; route() and groups use it by name. Fields are checked
--- at load, with file:line.
---@param name string
---@return fun(t: chute.proxy)
function chute.proxy(name) end

---@class chute.group
---@field type "select"|"fallback"|"url-test"|"load-balance"
---@field proxies string[]       members: proxies declared above, "DIRECT", "REJECT"
---@field url? string            health check: "http://host[:port]/path" fetched through each member
---@field interval? number       seconds between checks (default 300 with a url)
---@field timeout? number        seconds per check (default 5)
---@field tolerance? number      url-test: ms a member must beat the current one by (default 50)
---@field selected? string       select: the member at start (default the first)

--- Declares a policy group: select (chosen by chute.select), fallback (the
--- first healthy member), url-test (the fastest, with a tolerance) or
--- load-balance (destinations spread by consistent hashing).
---@param name string
---@return fun(t: chute.group)
function chute.group(name) end

--- Chooses the member of a select group (at load: its starting choice).
---@param group string
---@param member string
function chute.select(group, member) end

---@class chute.ruleset
local ruleset = {}

--- Whether any entry of the list matches the flow, and on which line.
---@param flow chute.flow
---@return boolean matched
---@return integer? line
function ruleset:match(flow) end

---@class chute.ruleset.options
---@field format? "auto"|"surge"|"domain-set"|"classical"|"domain"|"ipcidr"
---@field skip_invalid? boolean  leave out (and count) malformed lines, instead of failing
---@field strict? boolean  fail on rule types chute cannot evaluate (default: left out, one warning)

--- Loads a rule list from the bundle into C matchers (at load time).
---@param path string  relative to the bundle
---@param opts? chute.ruleset.options
---@return chute.ruleset
function chute.ruleset(path, opts) end

--- Compiles a Surge/Clash-style rule list into a route function. Each rule is
--- {TYPE, VALUE, POLICY [, option...]} read as a list line is ("no-resolve",
--- "src", ...), {"RULE-SET", ruleset | "LAN" | "SYSTEM", POLICY [, "no-resolve"]},
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
