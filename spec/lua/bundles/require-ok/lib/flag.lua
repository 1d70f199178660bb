-- A module that returns nothing: require gives true.
flag_loaded = true
