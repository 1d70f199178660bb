-- Indexes nil on line 4.
local M = {}
local settings = nil
M.port = settings.port
return M
