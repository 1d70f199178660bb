-- A misspelt key inside a nested table: the error names the full path.
local chute = require "chute"

chute.config {
  log_level = "info",
  timeouts = { conect = 5 },
}
