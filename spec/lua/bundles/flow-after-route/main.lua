-- A flow kept in an upvalue and used after route() returned. The only Lua
-- that runs after route() in `chute route` is a finalizer when the state
-- closes; the sentinel lives in a global so it is collected only then.
local chute = require "chute"

local kept, kept_host
sentinel = setmetatable({}, { __gc = function()
  local ok, err = pcall(function() return kept.host end)
  chute.log("warn", "kept.host: " .. tostring(ok) .. ", " .. tostring(err))
  chute.log("warn", "copied host: " .. tostring(kept_host))
end })

function chute.route(flow)
  kept = flow
  kept_host = flow.host
  return "DIRECT"
end
