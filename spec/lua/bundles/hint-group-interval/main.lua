local chute = require "chute"
chute.proxy "hk" { type = "socks5", server = "192.0.2.1", port = 1080 }
chute.group "auto" { type = "url-test", proxies = { "hk" }, url = "http://192.0.2.9/",
                     interval = "5m" }
