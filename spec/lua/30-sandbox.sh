#!/usr/bin/env bash
# Lua surface, sandbox: what scripts cannot reach (os.execute, io.popen,
# package, debug, loadfile, dofile, bytecode; reading a removed name raises
# a message saying what to use instead), io.open confined to the bundle and
# read-only, and globals locked once the bundle loaded.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

load_log="info  script: os.execute: sandbox/main.lua:13: os.execute is not available in the sandbox: bundles cannot run programs
info  script: os.getenv: sandbox/main.lua:14: os.getenv is not available in the sandbox: the engine's environment is not the bundle's (put settings in main.lua)
info  script: os.exit: sandbox/main.lua:15: os.exit is not available in the sandbox: a bundle cannot stop the engine
info  script: io.popen: sandbox/main.lua:16: io.popen is not available in the sandbox: bundles cannot run programs
info  script: io.lines: sandbox/main.lua:17: io.lines is not available in the sandbox: read a bundle file with io.open(path):lines()
info  script: package: sandbox/main.lua:18: package is not available in the sandbox: require finds the bundle's modules (require \"a.b\" loads a/b.lua)
info  script: debug: sandbox/main.lua:19: debug is not available in the sandbox: no debug library in bundles
info  script: loadfile: sandbox/main.lua:20: loadfile is not available in the sandbox: require \"name\" loads the bundle's name.lua
info  script: dofile: sandbox/main.lua:21: dofile is not available in the sandbox: require \"name\" loads the bundle's name.lua
info  script: os.time is a: function
info  script: load(text): 42
info  script: load(text) sees: a load-time global
info  script: load(text) os.execute: (load):1: os.execute is not available in the sandbox: bundles cannot run programs
info  script: load(bytecode): attempt to load a binary chunk (mode is 't')
info  script: load(bytecode, 'b'): attempt to load a binary chunk (mode is 't')
info  script: io.open(data.txt): first line / second line
info  script: io.open(data.txt, rb): 23
info  script: io.open(missing.txt): nil, sandbox/missing.txt: No such file or directory
info  script: io.open(../x): io.open: '../x' is outside the bundle
info  script: io.open(/etc/passwd): io.open: '/etc/passwd' is outside the bundle
info  script: io.open(data.txt, w): io.open: mode 'w' not allowed (bundles are read-only)
info  script: io.open(data.txt, a): io.open: mode 'a' not allowed (bundles are read-only)"

chute check sandbox
expect "load time: missing functions, load() text only, io.open confined" 0 "ok: sandbox" "$load_log"

chute route sandbox global-read.test
expect "globals set at load time are read at run time" 0 "REJECT${T}route" "$load_log"

chute route sandbox read.test
expect "io.open reads a bundle file inside route()" 0 "REJECT${T}route" "$load_log"

chute route sandbox global-write.test
expect_fallback "writing a global inside route() is an error" "fallback: error" "$load_log
warn  flow 1: route() failed: sandbox/main.lua:51: assignment to global 'counter' after the bundle loaded (use a local); using DIRECT"

chute route sandbox env-write.test
expect_fallback "writing through _G inside route() is the same error" "fallback: error" "$load_log
warn  flow 1: route() failed: sandbox/main.lua:53: assignment to global 'counter' after the bundle loaded (use a local); using DIRECT"

chute route sandbox passwd.test
expect_fallback "io.open outside the bundle in route(): error with file:line" "fallback: error" "$load_log
warn  flow 1: route() failed: sandbox/main.lua:55: io.open: '/etc/passwd' is outside the bundle; using DIRECT"

exit $failed
