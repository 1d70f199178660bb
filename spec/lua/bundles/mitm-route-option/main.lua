-- route() with an option it does not know: a warning naming route()'s line.
local chute = require "chute"

function chute.route(flow)
  return "REJECT", { mitn = false }
end
