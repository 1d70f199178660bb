local chute = require "chute"
-- The profile as the user keeps it, run as it is.
chute.surge "profile.conf"
