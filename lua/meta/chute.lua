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
---@field mixed? string|chute.listener  SOCKS5 and HTTP on one port (Clash's mixed-port), told apart by the first byte

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
---@field fake_ip_range? string   default "198.18.0.0/15"; a /8 to a /28 (13 addresses)
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

---@class chute.config.mitm
---@field hosts? string|string[]  hosts whose HTTPS is decrypted, Surge syntax: "*.example.com", "api.example.net:8443" (port 443 unless given), "-pinned.example.com" excludes; '*' and '?' wildcards, first match wins
---@field ca? string              a CA certificate (PEM) to mint leaves from, relative to the bundle (default: chute's own, `chute ca init`)
---@field ca_key? string          its private key (default: the .key file beside `ca`)
---@field skip_verify_hosts? string|string[]  origins whose certificate is not checked (warned at load)
---@field auto_bypass? boolean    pass a host through uninspected for a while after a client refused the minted leaf (default false)
---@field bypass_seconds? number  how long (default 300)
---@field block_quic? boolean     refuse UDP/443 to MITM hosts on the TUN so browsers fall back to TCP (default true)
---@field max_body? integer       bytes of a body a hook may see; the default for hooks' max_body (default 131072)
---@field max_buffered? integer   HTTP/2 body bytes chute holds across all connections; past it windows stop reopening and senders wait (default 67108864)

---@class chute.config.geo.remote
---@field url string          http(s) URL of the file, fetched in the background (the cache is read at load)
---@field interval? number    seconds between checks (default 604800, a week)
---@field via? string         policy the fetch goes through (default "DIRECT")
---@field path? string        cache file: absolute, or under <state>/cache/ (default "geo-<kind>-<hash>")
---@field max_size? integer   bytes; a bigger body is refused and the old file kept (default 67108864)

---@class chute.config.geo
---@field mmdb? string|chute.config.geo.remote     country database for GEOIP/SRC-GEOIP: MaxMind/GeoLite2-Country, sing-geoip or Meta-geoip0 .mmdb, relative to the bundle or absolute (default "Country.mmdb")
---@field asn? string|chute.config.geo.remote      ASN database for IP-ASN/SRC-IP-ASN, GeoLite2-ASN schema (default "GeoLite2-ASN.mmdb")
---@field geosite? string|chute.config.geo.remote  v2ray geosite.dat for GEOSITE,name (default "GeoSite.dat"); only the names rules use are compiled

---@class chute.config
---@field geo? chute.config.geo  files of GEOIP, IP-ASN and GEOSITE rules (opened at load; a bad one stops it)
---@field mitm? chute.config.mitm  decrypt HTTPS for chosen hosts (Lua hooks: chute.on_request, chute.on_response)
---@field dns? chute.config.dns  the built-in DNS server and the resolver's upstreams
---@field log_level? "error"|"warn"|"info"|"debug"  default "info"; `chute run --log-level` wins
---@field log_format? "text"|"json"  "json": one JSON object per line (time, level, event, msg, fields); `chute run --log-format` wins
---@field log_file? string  append the log here instead of stderr (relative: to the bundle); SIGUSR2 reopens it (logrotate)
---@field fallback? chute.policy  policy when route() fails, overruns or names no known policy (default "DIRECT")
---@field listen? chute.config.listen
---@field timeouts? chute.config.timeouts
---@field tun? chute.config.tun  capture a machine's traffic on a TUN device (root)
---@field outbound? chute.config.outbound
---@field control? chute.config.control  the control API and dashboard (off unless given)
---@field decision_cache? integer  entries of the per-destination decision cache, 0 off (default 4096)
---@field budget? integer  Lua instructions per route() call (default 100000, at least 1000)
---@field lua_memory_mb? integer  memory cap of the script state (default 64)
---@field memory_limit? string|integer  what the engine stays within: "15M", "50 MiB" or bytes, at least 8 MiB; lwIP, flow caps, DNS, Lua and rule sets are sized from it (chute_options.memory_limit wins)

---@class chute.config.control
---@field listen? string  "IP:PORT" of the Clash-compatible API, /metrics and /ui/ (default "127.0.0.1:9090")
---@field secret? string  required as "Authorization: Bearer S" or ?token=S; needed off loopback
---@field cors? string    Access-Control-Allow-Origin for dashboards served elsewhere ("*" any; default the API's own origin)

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
--- A second result sets options for the flow: { mitm = false } never
--- decrypts it, { mitm = true } always does (else the mitm.hosts list
--- decides); such decisions skip the decision cache. An unknown option is
--- an error (logged with file:line; the fallback policy).
---@type fun(flow: chute.flow): chute.policy?, chute.route_options?
chute.route = nil

---@class chute.route_options
---@field mitm? boolean  override the mitm.hosts list for this flow

---@class chute.headers
--- Header fields of a decrypted request or response: names are
--- case-insensitive, order and repeats are kept. h[name] is the first value
--- (or nil); h[name] = "v" replaces every field of that name, = { "a", "b" }
--- replaces them with two, = nil deletes them. pairs(h) walks name, value in
--- order; #h is the field count. Content-Length and Transfer-Encoding cannot
--- be edited, Host cannot be removed, values with control bytes are refused.
---@field [string] string?
local headers = {}

--- Every value of `name`, in order.
---@param name string
---@return string[]
function headers:all(name) end

--- for name, value in h:each() do ... end (as pairs(h)).
---@return fun(): string, string
function headers:each() end

--- The first value of `name` (for names such as "all" that are methods).
---@param name string
---@return string?
function headers:get(name) end

--- Appends a field.
---@param name string
---@param value string
function headers:add(name, value) end

---@class chute.request
---@field method string        settable
---@field scheme string        "https"
---@field host string          the origin the flow names (read-only; req.headers.host is the Host field)
---@field port integer
---@field path string          without the query; settable (must start with '/')
---@field query string?        after '?'; settable, nil removes it
---@field url string           "https://host[:port]/path?query" as it arrived (what patterns match)
---@field headers chute.headers
---@field body string?         with { body = true } and within max_body; settable then

---@class chute.response
---@field status integer       read-only (the body's framing follows it)
---@field reason string
---@field headers chute.headers
---@field body string?         with { body = true } and within max_body; settable then

---@class chute.hook_options
---@field body? boolean        see the body (buffered up to max_body; a larger one skips this hook and streams)
---@field max_body? integer    bytes, 1..16777216 (default mitm.max_body, 128 KiB)
---@field method? string|string[]  only these methods ("GET", { "GET", "HEAD" })

---@class chute.reply

--- Registers a hook for decrypted requests whose URL matches `pattern` (a
--- PCRE2 regex matched in C against "https://host[:port]/path?query"; other
--- requests never enter Lua). Hooks run in registration order under the
--- instruction budget and memory cap; return nothing to forward the request
--- (edited or not), or chute.respond/redirect/reject to answer it. A hook
--- that fails is logged with file:line and its edits are dropped.
---@param pattern string
---@param fn fun(req: chute.request): chute.reply?
---@param opts? chute.hook_options
function chute.on_request(pattern, fn, opts) end

--- Registers a hook for the responses to requests whose URL matches.
---@param pattern string
---@param fn fun(resp: chute.response, req: chute.request)
---@param opts? chute.hook_options
function chute.on_response(pattern, fn, opts) end

--- A local answer for on_request to return. `headers` maps names to a
--- string or a list of strings (Content-Length, Transfer-Encoding and
--- Connection are chute's to write).
---@param status integer  100..599
---@param headers? table<string, string|string[]>
---@param body? string
---@return chute.reply
function chute.respond(status, headers, body) end

--- A redirect for on_request to return.
---@param url string
---@param status? 301|302|303|307|308  default 302
---@return chute.reply
function chute.redirect(url, status) end

--- For on_request to return: close the client's connection, no answer.
---@return chute.reply
function chute.reject() end

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
---@field pool? boolean|chute.pool  warm connections to the server, handed to new flows at once (default: on for trojan and https, off for the others; false: off)

--- A proxy's pool of idle connections, already connected (and TLS-handshaken
--- for trojan and https). Its size follows the new flows per second of the
--- last minute, up to max_idle.
---@class chute.pool
---@field max_idle? integer      at most this many idle connections (1..64, default 8)
---@field idle_timeout? number   seconds an idle connection is kept (1..3600, default 30)

--- Declares a proxy; route() and groups use it by name. Fields are checked
--- at load, with file:line.
---@param name string
---@return fun(t: chute.proxy)
function chute.proxy(name) end

---@class chute.provider
---@field url string             "http[s]://host[:port]/path": a Clash proxies: list, base64 of share links, or share links one a line
---@field interval? number       seconds between fetches (1..2592000, default 3600)
---@field via? string            the policy the fetch goes through (default "DIRECT")
---@field filter? string         a PCRE2 regex: only the proxies whose name matches
---@field path? string           the cache file: under <state>/cache/ (no ".."), or absolute (default "provider-<name>")
---@field max_size? integer      bytes; a larger body is refused and the cache kept (default 16 MiB)

--- Declares a proxy provider (before any group): its proxies join the
--- bundle's, named as the subscription names them ("hk", then "hk 2"), and
--- groups take them with use = { "name" }. At load they come from the cache
--- (none on a first start: no proxies, said in the log); the engine fetches
--- in the background and reloads the bundle when the body changed and
--- decodes. ss:// (SIP002, legacy), trojan://, socks5://, http(s):// share
--- links; entries chute cannot use (vmess, plugins) are logged and left out.
---@param name string
---@return fun(t: chute.provider)
function chute.provider(name) end

---@class chute.group
---@field type "select"|"fallback"|"url-test"|"load-balance"
---@field proxies? string[]      members: proxies declared above, "DIRECT", "REJECT"
---@field use? string[]          providers whose proxies follow `proxies` (a group with none yet rejects)
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

---@class chute.ruleset.remote: chute.ruleset.options
---@field url string          "http[s]://host[:port]/path" (https checked against the system store or $SSL_CERT_FILE)
---@field interval? number    seconds between fetches (1..2592000, default 86400)
---@field via? string         the policy the fetch goes through (default "DIRECT")
---@field path? string        the cache file: under <state>/cache/ (no ".."), or absolute (default from the URL)
---@field max_size? integer   bytes; a larger list is refused and the cache kept (default 16 MiB)

--- Loads a rule list from the bundle into C matchers (at load time), or,
--- given { url = ... }, a remote list from its cache in chute's state
--- folder (empty until the first fetch; the engine fetches in the
--- background with If-None-Match/If-Modified-Since and reloads the bundle
--- when a new list parses; a failed fetch or a bad list keeps the old).
---@param path string|chute.ruleset.remote  relative to the bundle, or a remote list
---@param opts? chute.ruleset.options
---@return chute.ruleset
function chute.ruleset(path, opts) end

---@class chute.module.inline
---@field text string  the module's lines ([URL Rewrite], [Header Rewrite], [Map Local], [Body Rewrite], [MITM])
---@field name? string  what messages call it (default "(inline module)")

--- Loads a Surge module (at load time): its [URL Rewrite], [Header Rewrite],
--- [Map Local] and [Body Rewrite] lines apply to MITM'd requests, in call
--- order and before the Lua hooks; its [MITM] hostname entries join the MITM
--- host list (%APPEND%, %INSERT%, or a bare value that replaces it). What
--- chute cannot run ([Script], unknown sections) is logged once as a warning;
--- a malformed line fails the load naming file:line. Map Local data= files
--- are paths inside the bundle.
---@param src string|chute.module.inline  a module file relative to the bundle, or { text = ... }
function chute.module(src) end

---@class chute.import.options
---@field config? false|table  false: the bundle calls chute.config itself; a table: its keys replace the file's
---@field route? false  false: chute.route is left to the bundle (call the returned function from it)

--- Runs a Clash/mihomo config.yaml of the bundle as it is (at load time):
--- its proxies, proxy-groups (groups of groups flattened), providers,
--- rule-providers and rules, ports, dns and tun become chute.proxy /
--- chute.group / chute.ruleset / chute.rules / chute.config, exactly as
--- `chute import` would write them. What chute cannot do is logged once,
--- with config.yaml:LINE and what was done instead; an error names the
--- config's own line. Returns the rules' route function.
---@param path string  relative to the bundle
---@param opts? chute.import.options
---@return fun(flow: chute.flow): chute.policy?
function chute.clash(path, opts) end

--- The same for a Surge profile.conf: [General], [Proxy], [Proxy Group],
--- [Rule] (RULE-SET / DOMAIN-SET files and URLs), and its [MITM],
--- [URL Rewrite], [Header Rewrite], [Map Local], [Body Rewrite] sections
--- through chute.module.
---@param path string  relative to the bundle
---@param opts? chute.import.options
---@return fun(flow: chute.flow): chute.policy?
function chute.surge(path, opts) end

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
