-- A module that is neither in the bundle nor in chute's library.
local chute = require "chute"
local helpers = require "lib.helpers"
