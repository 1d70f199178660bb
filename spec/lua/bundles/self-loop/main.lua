-- A SOCKS5 proxy that is chute's own SOCKS5 listener: refused at load.
local chute = require "chute"
chute.config { listen = { socks = { address = "0.0.0.0:21080" } } }
chute.proxy "self" { type = "socks5", server = "127.0.0.1", port = 21080 }
