local chute = require "chute"
chute.proxy "hk" { type = "socks5", server = "192.0.2.1", port = 1080 }
chute.proxy "jp" { type = "socks5", server = "192.0.2.2", port = 1080 }
chute.group "auto" { type = "fallback", proxies = { "hk", "JP" } }
