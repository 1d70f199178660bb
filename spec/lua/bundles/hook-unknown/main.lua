-- A misspelt hook name.
local chute = require "chute"

function chute.rout(flow)
  return "DIRECT"
end
