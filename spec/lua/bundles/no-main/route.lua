-- This folder has no main.lua, so it is not a bundle.
return "DIRECT"
