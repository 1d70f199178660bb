#!/usr/bin/env bash
# Lua surface, limits and logging: the instruction budget
# (pcall, xpcall and coroutines cannot swallow it), the load budget, the
# bundle's fallback policy, the memory cap, chute.log and print.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

over() { # over LINE [BUDGET] [POLICY]: the warning for a budget overrun
    echo "warn  flow 1: route() failed: $1: instruction budget exceeded (${2:-100000} instructions); using ${3:-DIRECT}"
}

chute route budget loop.test
expect_fallback "a runaway loop: fallback: budget, the loop's line" "fallback: budget" "$(over budget/main.lua:11)"
chute route budget pcall.test
expect_fallback "pcall inside route() cannot swallow the overrun" "fallback: budget" "$(over budget/main.lua:13)"
chute route budget xpcall.test
expect_fallback "nor can xpcall with a handler" "fallback: budget" "$(over budget/main.lua:15)"
chute route budget coroutine.test
expect_fallback "nor coroutine.resume of a coroutine made in route()" "fallback: budget" "$(over budget/main.lua:17)"
chute route budget load-coroutine.test
expect_fallback "nor coroutine.resume of a coroutine made at load" "fallback: budget" "$(over budget/main.lua:6)"
chute route budget within.test
expect "a bounded loop under the budget completes" 0 "REJECT${T}route" ""

chute route budget-config work.test
expect "budget = 10000000: work past the default budget completes" 0 "REJECT${T}route" ""
chute route budget-config forever.test
expect_fallback "budget = 10000000: the overrun names the bundle's budget" "fallback: budget" \
    "$(over budget-config/main.lua:7 10000000)"

chute check budget-load
expect "a runaway loop at load: the load budget, file:line" 1 "" \
    "chute: budget-load/main.lua:4: instruction budget exceeded (200000000 instructions)"

chute route fallback-reject error.test
expect_fallback "fallback = REJECT on an error" "fallback: error" \
    "warn  flow 1: route() failed: fallback-reject/main.lua:8: broken; using REJECT" REJECT
chute route fallback-reject loop.test
expect_fallback "fallback = REJECT on an overrun" "fallback: budget" "$(over fallback-reject/main.lua:10 100000 REJECT)" REJECT
chute route fallback-reject nope.test
expect_fallback "fallback = REJECT on an unknown name" "fallback: unknown policy" \
    "warn  flow 1: fallback-reject/main.lua:5: route() returned unknown policy 'NOPE'; using REJECT" REJECT
chute route fallback-reject nil.test
expect "fallback = REJECT on nil" 0 "REJECT${T}fallback: route() returned nil" ""
chute route fallback-reject other.test
expect "fallback = REJECT leaves decisions alone" 0 "DIRECT${T}route" ""

chute route memory-cap table.test
expect_fallback "lua_memory_mb = 8: a huge table fails with not enough memory" "fallback: error" \
    "warn  flow 1: route() failed: memory-cap/main.lua:11: not enough memory; using DIRECT"
chute route memory-cap string.test
expect_fallback "lua_memory_mb = 8: a 16 MiB string fails the same way" "fallback: error" \
    "warn  flow 1: route() failed: memory-cap/main.lua:11: not enough memory; using DIRECT"
chute route memory-cap pcall.test
expect "lua_memory_mb = 8: memory is usable again after the failure" 0 "REJECT${T}route" \
    "info  script: pcall(hog): not enough memory"

load_log="info  script: log-print/main.lua:4: loading
info  script: print at load${T}1${T}nil${T}true"
chute route log-print example.com
expect "chute.log has file:line and level, print goes to the log at info" 0 "DIRECT${T}route" \
"$load_log
warn  script: log-print/main.lua:11: x
error script: log-print/main.lua:12: routing example.com
info  script: print in route${T}443"
chute route log-print bad-level.test
expect_fallback "chute.log with an unknown level is an error" "fallback: error" \
"$load_log
warn  flow 1: route() failed: log-print/main.lua:9: chute.log: unknown level 'loud'; using DIRECT"

exit $failed
