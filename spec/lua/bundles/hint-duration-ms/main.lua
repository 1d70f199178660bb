local chute = require "chute"
chute.config { timeouts = { udp = "1500ms" } }
