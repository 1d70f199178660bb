-- chute.log and print go to the engine's log; chute.log adds file:line.
local chute = require "chute"

chute.log("info", "loading")
print("print at load", 1, nil, true)

function chute.route(flow)
  if flow.host == "bad-level.test" then
    chute.log("loud", "x")
  end
  chute.log("warn", "x")
  chute.log("error", "routing " .. flow.host)
  chute.log("debug", "not shown at the default level")
  print("print in route", flow.dst_port)
  return "DIRECT"
end
