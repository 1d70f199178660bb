local chute = require "chute"
chute.module "modules/bad.sgmodule"
