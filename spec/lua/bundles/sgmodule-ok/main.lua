local chute = require "chute"
chute.module "modules/all.sgmodule"
chute.module { name = "inline", text = [[
[URL Rewrite]
^https://inline\.test/ https://inline.test/ok 302
[Script]
inline-js = type=http-request,pattern=^https://inline\.test/,script-path=x.js
]] }
