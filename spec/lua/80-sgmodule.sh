#!/usr/bin/env bash
# chute.module: Surge modules loaded unchanged from the bundle or inline;
# what chute cannot run ([Script], unknown sections, ignored [MITM] keys)
# is listed once at load, a malformed line stops the bundle naming the
# module's file:line, and the example module ships clean.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

chute check sgmodule-ok
expect "a module with every section, and an inline one: warnings listed once" 0 "ok: sgmodule-ok" \
"warn  chute.module: modules/all.sgmodule:11: [Script] 'js' is JavaScript, which chute does not run: left out (write it as a chute.on_request/on_response hook)
warn  chute.module: modules/all.sgmodule:12: section [General] is not supported by chute: 1 line left out
warn  chute.module: modules/all.sgmodule:16: [MITM] h2 is ignored: chute picks the protocol from the origin's ALPN
warn  chute.module: inline:4: [Script] 'inline-js' is JavaScript, which chute does not run: left out (write it as a chute.on_request/on_response hook)"

chute check sgmodule-bad
expect "a malformed line names the module's file:line" 1 "" \
"chute: sgmodule-bad/main.lua:2: chute.module: modules/bad.sgmodule:3: [URL Rewrite] '^https://a\\.test/x https://b.test/ 303': unknown type '303' (syntax: REGEX REPLACEMENT [header|302|307|reject|reject-200|reject-img|reject-dict|reject-array|reject-drop])"

# Bundles made on the fly: main.lua from $2, modules/m.sgmodule from $3.
mkbundle() { # NAME MAIN [MODULE]
    mkdir -p "$tmp/$1/modules"
    printf '%s\n' "$2" >"$tmp/$1/main.lua"
    [ $# -lt 3 ] || printf '%s\n' "$3" >"$tmp/$1/modules/m.sgmodule"
}
checks() { # WHAT BUNDLE RC STDOUT LOG
    (cd "$tmp" && timeout 30 "$CHUTE" check "$2") >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    log=$(sed -E 's/^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]{12} //' "$tmp/err")
    expect "$1" "$3" "$4" "$5"
}

mkdir -p "$tmp/example/modules"
cp "$CHUTE_TOP/examples/mitm/modules/example.sgmodule" "$tmp/example/modules/"
printf '%s\n' 'local chute = require "chute"' 'chute.module "modules/example.sgmodule"' 'chute.config { listen = { socks = "127.0.0.1:0" } }' 'chute.route = function() return "DIRECT" end' >"$tmp/example/main.lua"
checks "examples/mitm/modules/example.sgmodule loads without a warning" example 0 "ok: example" ""

mkbundle missing 'require("chute").module "modules/none.sgmodule"'
checks "a missing module file" missing 1 "" \
    "chute: missing/main.lua:1: chute.module: missing/modules/none.sgmodule: No such file or directory"

mkbundle outside 'require("chute").module "../x.sgmodule"'
checks "a module outside the bundle" outside 1 "" \
    "chute: outside/main.lua:1: chute.module: outside/../x.sgmodule: outside the bundle"

mkbundle mapout 'require("chute").module "modules/m.sgmodule"' \
    '[Map Local]
^https://x\.test/ data="../../etc/passwd"'
checks "Map Local data= stays inside the bundle" mapout 1 "" \
    "chute: mapout/main.lua:1: chute.module: modules/m.sgmodule:2: [Map Local] '^https://x\\.test/ data=\"../../etc/passwd\"': data=\"../../etc/passwd\": Operation not permitted (a path inside the bundle)"

mkbundle badarg 'require("chute").module(42)'
checks "a bad argument says what is expected" badarg 1 "" \
    "chute: badarg/main.lua:1: chute.module: expected a module file of the bundle (\"modules/x.sgmodule\") or { text = [[...]] }"

mkbundle badhost 'require("chute").module { text = "[MITM]\nhostname = %APPEND% a.test:http" }'
checks "a bad [MITM] host names the inline module's line" badhost 1 "" \
    "chute: badhost/main.lua:1: chute.module: (inline module):2: [MITM] 'hostname = %APPEND% a.test:http': host pattern 'a.test:http': bad port 'http' (1..65535, or 0 for every port)"

exit $failed
