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

exit $failed
