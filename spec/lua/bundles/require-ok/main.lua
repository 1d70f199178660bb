-- Modules from the bundle: found by name, loaded once, sharing the sandbox.
local chute = require "chute"

from_main = "set in main.lua"
local util = require "lib.util"
local again = require "lib.util"
print("same table: " .. tostring(util == again))
print("loads: " .. load_count)
print("greet: " .. util.greet("bundle"))
print("from_util: " .. from_util)
print("util saw from_main: " .. util.saw_main)
print("same chute: " .. tostring(util.chute == chute))
print("no return value: " .. tostring(require "lib.flag"))
print("bad name: " .. select(2, pcall(require, "lib/util")))

function chute.route(flow)
  return util.policy_for(flow.host)
end
