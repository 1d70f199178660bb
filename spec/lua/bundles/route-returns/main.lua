-- route() returns what the destination's name asks for.
local chute = require "chute"

local answers = {
  ["direct.test"] = "DIRECT",
  ["reject.test"] = "REJECT",
  ["nope.test"] = "NOPE",
  ["lower.test"] = "direct",
  ["table.test"] = {},
}

function chute.route(flow)
  local h = flow.host
  if h == "error.test" then
    error("no route for " .. h)
  elseif h == "error-table.test" then
    error({ code = 1 })
  end
  return answers[h]
end
