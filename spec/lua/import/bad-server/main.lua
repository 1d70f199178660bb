local chute = require "chute"
chute.clash "config.yaml"
