#!/usr/bin/env bash
# Lua surface, loading: chute.config validation, hook names, syntax errors
# and bundle folders. Each error must name the file:line and the key.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

# check_error WHAT BUNDLE MESSAGE: `chute check BUNDLE` exits 1 with MESSAGE.
check_error() {
    chute check "$2"
    expect "$1" 1 "" "chute: $3"
}

# known_list WHAT KEY...: the "(known: a, b, ...)" list that ends the last
# message is sorted and holds each KEY. The schema grows, so this checks the
# list's shape; the caller checks the rest of the message, the list cut.
known_list() {
    local what=$1 list k
    shift
    list=$(sed -nE 's/.*\(known: ([a-z_]+(, [a-z_]+)*)\)$/\1/p' <<<"$log")
    if [ -z "$list" ]; then
        echo "FAIL $what: no (known: ...) list in: $log"
        failed=1
        return
    fi
    if [ "$(tr -d ' ' <<<"$list" | tr ',' '\n')" != "$(tr -d ' ' <<<"$list" | tr ',' '\n' | LC_ALL=C sort)" ]; then
        echo "FAIL $what: known keys not sorted: $list"
        failed=1
    fi
    for k in "$@"; do
        if ! grep -qE "(^|, )$k(,|$)" <<<"$list"; then
            echo "FAIL $what: '$k' missing from the known keys: $list"
            failed=1
            return
        fi
    done
    echo "ok   $what: known keys sorted, with $*"
    log=$(sed -E 's/\(known: [a-z_, ]+\)$/(known: LIST)/' <<<"$log")
}

top_keys="budget fallback listen log_level lua_memory_mb timeouts"
chute check config-unknown-key
known_list "unknown key" $top_keys
expect "unknown key names main.lua:4 and the key" 1 "" \
    "chute: config-unknown-key/main.lua:4: chute.config: unknown key 'lsten': did you mean 'listen'? (known: LIST)"
chute check config-nested-key
known_list "nested unknown key" connect idle
expect "nested unknown key names its path and the key's own line" 1 "" \
    "chute: config-nested-key/main.lua:6: chute.config: unknown key 'timeouts.conect': did you mean 'connect'? (known: LIST)"
check_error "wrong type names the key and both types" config-type \
    "config-type/main.lua:3: chute.config: budget: expected integer, got string \"x\""
check_error "listener address without a port: the line of its key" config-listen \
    "config-listen/main.lua:4: chute.config: listen.socks.address: '127.0.0.1' is not IP:PORT (\"127.0.0.1:1080\", \"[::1]:1080\")"
check_error "unknown fallback policy" config-fallback \
    "config-fallback/main.lua:3: chute.config: fallback: unknown policy \"NOPE\""
check_error "bad log level" config-log-level \
    "config-log-level/main.lua:3: chute.config: log_level: \"verbose\" is not one of error, warn, info, debug"
check_error "memory_limit below the floor: the key's line" config-memory-limit \
    "config-memory-limit/main.lua:5: chute.config: memory_limit: must be at least 8 MiB (\"8M\") and at most 1 TiB"
check_error "memory_limit not a size" config-memory-size \
    "config-memory-size/main.lua:5: chute.config: memory_limit: expected a size: bytes, or a string such as \"15M\", \"15 MiB\", \"1.5G\""
check_error "chute.config twice: the second call's line" config-twice \
    "config-twice/main.lua:4: chute.config: called twice"
check_error "unknown hook names the line of its definition" hook-unknown \
    "hook-unknown/main.lua:4: chute.rout: unknown hook: did you mean chute.route? (hooks: on_dns, route)"
check_error "a hook that is not a function" hook-not-function \
    "hook-not-function/main.lua:3: chute.route: expected a function, got string"
check_error "syntax error names file:line" syntax-error \
    "syntax-error/main.lua:4: unexpected symbol near '='"
check_error "missing bundle folder names the path" does-not-exist \
    "does-not-exist: no such bundle folder"
check_error "folder without main.lua names the path" no-main \
    "no-main: bundle has no main.lua"

# A bundle given by absolute path is named by that path; Lua keeps chunk
# names up to 59 bytes and shortens longer ones to "..." and the last 56.
abs_check() {
    local dir=$1 what=$2 p
    (cd / && timeout 30 "$CHUTE" check "$dir/config-twice") >"$tmp/out" 2>"$tmp/err"
    rc=$? out=$(cat "$tmp/out") log=$(cat "$tmp/err")
    p=$dir/config-twice/main.lua
    if [ ${#p} -gt 59 ]; then
        p="...${p: -56}"
    fi
    expect "$what" 1 "" "chute: $p:4: chute.config: called twice"
}
abs_check "$BUNDLES" "an absolute bundle path names the file by that path"
long=$tmp/a-folder-name-long-enough-to-push-the-path-past-sixty-bytes
ln -s "$BUNDLES" "$long"
abs_check "$long" "a long bundle path keeps its tail: the file and line"

chute check config-ok
expect "every known key with a good value loads" 0 "ok: config-ok" ""

chute route config-unknown-key example.com
known_list "route: unknown key" $top_keys
expect "route refuses a bundle that does not load" 1 "" \
    "chute: config-unknown-key/main.lua:4: chute.config: unknown key 'lsten': did you mean 'listen'? (known: LIST)"

chute route no-route example.com
expect "no route(): the fallback policy" 0 "REJECT${T}fallback: no route()" ""

exit $failed
