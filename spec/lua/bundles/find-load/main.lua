-- A backtracking pattern at load: the load budget ends it.
local chute = require "chute"
local hit = ("a"):rep(3000):find(".-.-.-.-b")
