-- A misspelt mitm key: named with its path, the known ones listed.
local chute = require "chute"

chute.config { mitm = { hosts = { "*.example.com" }, skip_verify = { "x.test" } } }
