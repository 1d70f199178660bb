local chute = require "chute"
chute.proxy "hk" { type = "socks5", server = "192.0.2.1", port = 1080 }
chute.group "inner" { type = "select", proxies = { "hk", "DIRECT" } }
chute.group "outer" { type = "select", proxies = { "inner" } }
