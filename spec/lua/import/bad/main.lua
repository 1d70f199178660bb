local chute = require "chute"
chute.clash "broken.yaml"
