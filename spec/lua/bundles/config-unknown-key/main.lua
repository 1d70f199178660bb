-- A misspelt top-level key: the error names main.lua:4 and the key.
local chute = require "chute"

chute.config { lsten = { socks = "127.0.0.1:1080" } }
