#!/usr/bin/env bash
# Lua surface, require: bundle modules by dotted name,
# loaded once, sharing the sandbox; missing and failing modules name their
# file:line.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

load_log="info  script: loading lib.util
info  script: same table: true
info  script: loads: 1
info  script: greet: hello, bundle
info  script: from_util: set in lib/util.lua
info  script: util saw from_main: set in main.lua
info  script: same chute: true
info  script: no return value: true
info  script: bad name: require: bad module name 'lib/util'"

chute route require-ok blocked.test
expect "require finds lib/util.lua, once, in the shared sandbox" 0 "REJECT${T}route" "$load_log"

chute route require-ok other.test
expect "route() calls into the module" 0 "DIRECT${T}route" "$load_log"

chute check require-missing
expect "a missing module: its name, the file looked for, the requiring line" 1 "" \
    "chute: require-missing/main.lua:3: module 'lib.helpers' not found: no file 'lib/helpers.lua' in the bundle and no library module 'lib.helpers'"

chute check module-error
expect "a runtime error while a module loads names the module's file:line" 1 "" \
    "chute: module-error/lib/bad.lua:4: attempt to index a nil value (local 'settings')"

chute check module-syntax
expect "a syntax error in a module names the module's file:line" 1 "" \
    "chute: module-syntax/lib/broken.lua:4: unexpected symbol near 'end'"

exit $failed
