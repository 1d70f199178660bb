-- lib.util: counts its loads in a global, which main.lua reads.
local chute = require "chute"
local name = ...
print("loading " .. name)
load_count = (load_count or 0) + 1
from_util = "set in lib/util.lua"

local M = { chute = chute, saw_main = from_main }

function M.greet(who)
  return "hello, " .. who
end

function M.policy_for(host)
  if host == "blocked.test" then
    return "REJECT"
  end
  return "DIRECT"
end

return M
