-- A syntax error: the message names the file and line.
local chute = require "chute"
function chute.route(flow)
  local x = = 1
  return "DIRECT"
end
