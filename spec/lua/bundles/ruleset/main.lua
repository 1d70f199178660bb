local chute = require "chute"
local mixed = chute.ruleset "lists/mixed.list"
local clash = chute.ruleset("lists/clash.yaml", { format = "domain" })
local skip = chute.ruleset("lists/skip.list", { skip_invalid = true })
print(tostring(mixed), #mixed, tostring(clash), #skip)
function chute.route(flow)
  if mixed:match(flow) or clash:match(flow) or skip:match(flow) then return "REJECT" end
  return "DIRECT"
end
