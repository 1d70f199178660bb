local chute = require "chute"
-- Lists shaped like the public Surge and mihomo ones: types chute cannot
-- evaluate are left out with one warning a list, regexes hold commas,
-- wildcards follow the originals.
local surge = chute.ruleset "lists/surge.list"
local meta = chute.ruleset "lists/meta.yaml"
local dom = chute.ruleset("lists/domains.txt", { format = "domain" })
local inb = chute.ruleset "lists/inbound.list"
function chute.route(flow)
  if surge:match(flow) or meta:match(flow) or dom:match(flow) then return "REJECT" end
  if inb:match(flow) then return "REJECT" end
  return "DIRECT"
end
