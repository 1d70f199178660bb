-- What the sandbox leaves out, what it confines, and the global lock.
local chute = require "chute"

-- Globals set while the bundle loads stay readable afterwards.
from_main_text = "a load-time global"
limit = 3

local function show(name, v)
  print(name .. ": " .. tostring(v))
end
local function gone(f) return select(2, pcall(f)) end
-- Unavailable: reading one of these raises, saying what to use instead.
show("os.execute", gone(function() return os.execute end))
show("os.getenv", gone(function() return os.getenv end))
show("os.exit", gone(function() return os.exit end))
show("io.popen", gone(function() return io.popen end))
show("io.lines", gone(function() return io.lines end))
show("package", gone(function() return package end))
show("debug", gone(function() return debug end))
show("loadfile", gone(function() return loadfile end))
show("dofile", gone(function() return dofile end))
show("os.time is a", type(os.time))

-- load: text works in the sandbox; bytecode from string.dump is refused,
-- even when the caller asks for binary mode.
local dumped = string.dump(function() return "from bytecode" end)
show("load(text)", load("return 6 * 7")())
show("load(text) sees", load("return from_main_text")())
show("load(text) os.execute", gone(load("return os.execute")))
show("load(bytecode)", select(2, load(dumped)))
show("load(bytecode, 'b')", select(2, load(dumped, "dumped", "b")))

-- io.open reads the bundle's own files.
local f = io.open("data.txt")
show("io.open(data.txt)", f:read("l") .. " / " .. f:read("l"))
f:close()
show("io.open(data.txt, rb)", io.open("data.txt", "rb"):read("a"):len())
local missing, why = io.open("missing.txt")
show("io.open(missing.txt)", tostring(missing) .. ", " .. why)
-- ... and nothing outside it, nor for writing.
show("io.open(../x)", select(2, pcall(io.open, "../x")))
show("io.open(/etc/passwd)", select(2, pcall(io.open, "/etc/passwd")))
show("io.open(data.txt, w)", select(2, pcall(io.open, "data.txt", "w")))
show("io.open(data.txt, a)", select(2, pcall(io.open, "data.txt", "a")))

function chute.route(flow)
  local h = flow.host
  if h == "global-read.test" then
    return limit == 3 and from_main_text == "a load-time global" and "REJECT" or "DIRECT"
  elseif h == "global-write.test" then
    counter = 1
  elseif h == "env-write.test" then
    _G.counter = 1
  elseif h == "passwd.test" then
    io.open("/etc/passwd")
  elseif h == "read.test" then
    local fh = io.open("data.txt")
    local line = fh:read("l")
    fh:close()
    return line == "first line" and "REJECT" or "DIRECT"
  end
  return "DIRECT"
end
chute.config { listen = { socks = "127.0.0.1:0" } } -- chute check refuses a bundle that takes no traffic
