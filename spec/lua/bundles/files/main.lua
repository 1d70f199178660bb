-- Bundle files that are not plain files of the bundle (80-hostile.sh makes
-- the FIFO and the links in a copy of this folder; git keeps neither).
local chute = require "chute"

local function try(name)
  local ok, f, err = pcall(io.open, name)
  if not ok then f, err = nil, f end
  if f then
    local line = f:read("l")
    f:close()
    print("io.open(" .. name .. "): " .. tostring(line))
  else
    print("io.open(" .. name .. "): " .. tostring(err))
  end
end

try("data.txt")
try("fifo")
try("passwd-link")
try("etc-link/passwd")
try("inner-link")
try("sub/../data.txt")
print("require(fifomod): " .. select(2, pcall(require, "fifomod")))
print("require(linkmod): " .. select(2, pcall(require, "linkmod")))
print("ruleset(fifo): " .. select(2, pcall(chute.ruleset, "fifo")))
print("ruleset(passwd-link): " .. select(2, pcall(chute.ruleset, "passwd-link")))

-- Every handle is a descriptor: at most 64 at a time.
local held, err = {}, nil
for i = 1, 100 do
  local f, e = io.open("data.txt")
  if not f then err = e break end
  held[i] = f
end
print("open handles: " .. #held .. ", then: " .. tostring(err))
for _, f in ipairs(held) do f:close() end
local f = io.open("data.txt")
print("after closing them: " .. (f and "opens" or "fails"))
f:close()
require("chute").config { listen = { socks = "127.0.0.1:0" } } -- chute check refuses a bundle that takes no traffic
require("chute").route = function() return "DIRECT" end
