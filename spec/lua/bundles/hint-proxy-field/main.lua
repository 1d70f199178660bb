local chute = require "chute"
chute.proxy "hk" { type = "shadowsocks", server = "192.0.2.1", port = 8388,
                   cipher = "aes-128-gcm", passwd = "x" }
