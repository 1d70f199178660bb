-- lib/broken.lua does not parse.
local chute = require "chute"
local broken = require "lib.broken"
