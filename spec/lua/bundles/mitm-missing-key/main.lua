-- mitm.ca given without its key beside it (certs/ca.key).
local chute = require "chute"

chute.config { mitm = { ca = "certs/ca.pem" } }
