-- on_request is a call with a pattern, not a hook to assign.
local chute = require "chute"

function chute.on_request(req) end
