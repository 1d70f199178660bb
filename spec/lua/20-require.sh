#!/usr/bin/env bash
# Lua surface, require: bundle modules by dotted name,
# loaded once, sharing the sandbox; missing and failing modules name their
# file:line.
#
# Env: CHUTE (the binary; default $CHUTE_TOP/build/chute) and CHUTE_TOP (the
# repo; default: two folders up from this script). Exit 0 pass, 1 fail.
set -u
export LC_ALL=C
CHUTE_TOP=${CHUTE_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
CHUTE=${CHUTE:-$CHUTE_TOP/build/chute}
case $CHUTE in /*) ;; *) CHUTE=$PWD/$CHUTE ;; esac
BUNDLES=$CHUTE_TOP/spec/lua/bundles
[ -x "$CHUTE" ] || { echo "FAIL no chute binary at $CHUTE (set CHUTE)"; exit 1; }
T=$'\t'
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# chute ARGS: runs the binary from the bundles folder, so messages name
# "<bundle>/main.lua"; sets $rc, $out and $log (stderr, timestamps cut).
chute() {
    (cd "$BUNDLES" && timeout 30 "$CHUTE" "$@") >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    log=$(sed -E 's/^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]{12} //' "$tmp/err")
}

# expect WHAT RC STDOUT LOG: compares the last chute run exactly.
expect() {
    local got want
    got=$(printf 'exit %s\nstdout:\n%s\nlog:\n%s' "$rc" "$out" "$log")
    want=$(printf 'exit %s\nstdout:\n%s\nlog:\n%s' "$2" "$3" "$4")
    if [ "$got" == "$want" ]; then
        echo "ok   $1"
    else
        echo "FAIL $1"
        diff <(echo "$want") <(echo "$got") | sed 's/^/     /'
        failed=1
    fi
}

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
