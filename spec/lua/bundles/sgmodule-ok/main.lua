local chute = require "chute"
chute.module "modules/all.sgmodule"
chute.module { name = "inline", text = [[
[URL Rewrite]
^https://inline\.test/ https://inline.test/ok 302
[Script]
inline-js = type=http-request,pattern=^https://inline\.test/,script-path=x.js
]] }
require("chute").config { listen = { socks = "127.0.0.1:0" } } -- chute check refuses a bundle that takes no traffic
require("chute").route = function() return "DIRECT" end
