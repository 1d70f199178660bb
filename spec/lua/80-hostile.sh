#!/usr/bin/env bash
# Lua surface against hostile bundles (issue 19): memory over the cap at
# load, finalizers and message handlers outside the budget, single C calls
# that would run for hours, and bundle files that are FIFOs or links out.
# Every run has the `timeout` of lib/common.sh: a hang fails as exit 124.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

chute check memory-load
expect "a bundle over its memory cap after main.lua is refused with its size" 1 "" \
    "$(printf 'chute: memory-load/main.lua: the bundle holds %s MiB after loading, over lua_memory_mb = 4 (raise it, or keep less in memory)' \
    "$(sed -nE 's/.*holds ([0-9.]+) MiB.*/\1/p' <<<"$log")")"

over() { # over LINE [WHY]: the warning for an overrun in route() (hostile has budget = 1e7)
    echo "warn  flow 1: route() failed: $1: ${2:-instruction budget exceeded (10000000 instructions)}; using DIRECT"
}
# counted HOST: `chute route hostile HOST` for a case the instruction count
# must cut. On a machine so loaded that 10 M instructions outlast the
# 1050 ms wall clock the clock cuts first (same fallback, other words):
# then it runs again, up to 3 times.
counted() {
    for _ in 1 2 3; do
        chute route hostile "$1"
        case $log in *"time limit exceeded"*) ;; *) return 0 ;; esac
    done
}

chute check gc-load
expect "a __gc finalizer at load is refused with file:line (it would run unbudgeted)" 1 "" \
    "chute: gc-load/main.lua:4: setmetatable: __gc is not allowed in bundles (finalizers run outside the instruction budget; use __close)"
chute route hostile gc.test
expect_fallback "a __gc finalizer in route() is refused" "fallback: error" \
    "warn  flow 1: route() failed: hostile/main.lua:10: setmetatable: __gc is not allowed in bundles (finalizers run outside the instruction budget; use __close); using DIRECT"
chute route hostile file-gc.test
expect "file handles' metatable is locked (no __gc through it)" 0 "REJECT${T}route" \
    "info  script: file metatable: false"
counted xpcall-loop.test
expect_fallback "xpcall(loop, loop): the handler runs under the budget" "fallback: budget" \
    "$(over hostile/main.lua:5)"
chute route hostile xpcall.test
expect "xpcall keeps its results, handler value, handler errors and yields" 0 "REJECT${T}route" \
    "info  script: true${T}1${T}2${T}false${T}handled boom${T}false${T}again${T}1${T}true${T}42"

counted find.test
expect_fallback "a backtracking string.find is charged step by step: fallback: budget" \
    "fallback: budget" "$(over hostile/main.lua:41)"
counted gsub.test
expect_fallback "and so is gsub" "fallback: budget" "$(over hostile/main.lua:44)"
chute route hostile rep-empty.test
expect "string.rep of nothing 2^50 times is \"\" at once" 0 "REJECT${T}route" ""
counted rep.test
expect_fallback "string.rep 2^40 times is charged before it runs" "fallback: budget" \
    "$(over hostile/main.lua:50)"
counted move.test
expect_fallback "table.move over 2^40 slots is charged before it runs" "fallback: budget" \
    "$(over hostile/main.lua:53)"
counted insert.test
expect_fallback "table.insert under a __len of 2^40 is charged" "fallback: budget" \
    "$(over hostile/main.lua:58)"
counted concat.test
expect_fallback "table.concat over 2^40 slots of a C __index is charged" "fallback: budget" \
    "$(over hostile/main.lua:62)"
chute check find-load
expect "a backtracking string.find at load: the load budget, file:line" 1 "" \
    "chute: find-load/main.lua:3: instruction budget exceeded (200000000 instructions)"
start=$(date +%s%N)
chute route hostile clock.test
ms=$(( ($(date +%s%N) - start) / 1000000 ))
expect_fallback "work the count does not see: the wall clock ends the call" "fallback: budget" \
    "$(over hostile/main.lua:70 'time limit exceeded (1050 ms)')"
if [ "$ms" -gt 10000 ]; then echo "FAIL the wall clock cut took $ms ms (limit 1050)"; failed=1; fi

chute route hostile log.test
expect_fallback "chute.log, print and errors cannot forge log lines (control bytes escaped)" \
    "fallback: error" \
'warn  script: hostile/main.lua:76: one\nwarn  flow 9: forged\r\x1b[2J
info  script: two\nthree
warn  flow 1: route() failed: hostile/main.lua:87: four\nerror forged; using DIRECT'

chute route hostile unlock.test
expect_fallback "the global lock's metatable is hidden (it cannot be undone)" "fallback: error" \
"info  script: getmetatable(_G): false
warn  flow 1: route() failed: hostile/main.lua:83: assignment to global 'leaked' after the bundle loaded (use a local); using DIRECT"
chute route hostile nul.test
expect_fallback "\"DIRECT\\0junk\" is not DIRECT" "fallback: unknown policy" \
    'warn  flow 1: hostile/main.lua:87: route() returned unknown policy '"'"'DIRECT\0...'"'"'; using DIRECT'

chute check self-loop
expect "a proxy that is chute's own listener is refused at load" 1 "" \
    "chute: self-loop/main.lua:4: proxy 'self': 127.0.0.1:21080 is chute's own socks listener (0.0.0.0:21080); every flow through it would come back into chute (point it at another server)"

# The FIFO and the links live in a copy of bundles/files under $tmp.
b=$tmp/files
cp -r "$BUNDLES/files" "$b"
mkfifo "$b/fifo" "$b/fifomod.lua"
ln -s /etc/passwd "$b/passwd-link"
ln -s /etc "$b/etc-link"
ln -s data.txt "$b/inner-link"
ln -s /etc/passwd "$b/linkmod.lua"
chute check "$b"
log=${log//$tmp\//}
link="a symbolic link (bundle files are read without following links)"
expect "FIFOs, links out and links in: refused without blocking or reading; 64 handles at most" 0 "ok: $b" \
"info  script: io.open(data.txt): inside the bundle
info  script: io.open(fifo): files/fifo: not a regular file
info  script: io.open(passwd-link): files/passwd-link: $link
info  script: io.open(etc-link/passwd): files/etc-link/passwd: $link
info  script: io.open(inner-link): files/inner-link: $link
info  script: io.open(sub/../data.txt): io.open: 'sub/../data.txt' is outside the bundle
info  script: require(fifomod): files/fifomod.lua: not a regular file
info  script: require(linkmod): files/linkmod.lua: $link
info  script: ruleset(fifo): chute.ruleset: files/fifo: not a regular file
info  script: ruleset(passwd-link): chute.ruleset: files/passwd-link: $link
info  script: open handles: 64, then: files/data.txt: 64 files already open in this bundle (close the ones read)
info  script: after closing them: opens"

# main.lua replaced by a FIFO (as before a SIGHUP): an error, not a hang.
mkdir "$tmp/fifo-main"
mkfifo "$tmp/fifo-main/main.lua"
chute check "$tmp/fifo-main"
log=${log//$tmp\//}
expect "main.lua that is a FIFO: refused at once" 1 "" "chute: fifo-main/main.lua: not a regular file"

exit $failed
