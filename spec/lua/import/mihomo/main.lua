local chute = require "chute"
-- The config as the user keeps it, run as it is.
chute.clash "config.yaml"
