-- A URL pattern PCRE2 refuses: the line of the call and PCRE2's reason.
local chute = require "chute"

chute.on_request([[^https://api\.example\.com/(v1]], function(req) end)
