-- A MITM host pattern with a port out of range: main.lua:4 and the entry.
local chute = require "chute"

chute.config { mitm = { hosts = { "*.example.com", "api.example.net:70000" } } }
