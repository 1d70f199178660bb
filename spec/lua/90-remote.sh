#!/usr/bin/env bash
# chute.provider and chute.ruleset { url = ... } at load, without a network:
# their options checked with file:line, the caches read from the state
# folder (none yet: empty, said), a provider's proxies named, renamed and
# filtered, groups' use = {...}, and the bundle's own names winning over a
# provider's.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
export CHUTE_STATE_DIR=$tmp/state
B=$tmp/b
mkdir -p "$B"

# run CMD MAIN_LUA_BODY: chute CMD on a bundle with that main.lua.
run() {
    local cmd=$1
    shift
    printf 'local chute = require "chute"\n%s\n' "$1" >"$B/main.lua"
    shift
    (timeout 30 "$CHUTE" "$cmd" "$B" "$@") >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    log=$(sed -E 's/^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]{12} //' "$tmp/err")
}
has() { # WHAT TEXT REGEX
    if grep -q -E -- "$3" <<<"$2"; then echo "ok   $1"; else
        echo "FAIL $1: no /$3/ in:"; sed 's/^/     /' <<<"$2"; failed=1; fi
}

U='url = "http://127.0.0.1:9/x"'
bad() { # WHAT LUA REGEX
    run check "$2"
    [ "$rc" -eq 1 ] || { echo "FAIL $1: exit $rc"; failed=1; }
    has "$1" "$log" "$3"
}
bad "a provider needs a url" 'chute.provider "p" { interval = 5 }' 'main.lua:2: chute.provider "p": needs a url'
bad "https? only" 'chute.provider "p" { url = "ftp://h/x" }' 'main.lua:2: chute.provider "p": url .ftp://h/x.: http:// or https:// only'
bad "unknown field" "chute.provider \"p\" { $U, intervall = 5 }" "unknown field 'intervall' \\(fields: url, interval, via, path, max_size, filter\\)"
bad "a bad filter" "chute.provider \"p\" { $U, filter = \"(\" }" 'main.lua:2: chute.provider "p": filter: missing closing parenthesis'
bad "via names a policy" "chute.provider \"p\" { $U, via = \"nope\" }" "main.lua:2: provider p: via 'nope' is not a policy of the bundle"
bad "a path stays in the state folder" "chute.provider \"p\" { $U, path = \"../x\" }" "path '../x': a file name under the state folder's cache/"
bad "providers come before groups" "chute.group \"g\" { type = \"select\", proxies = { \"DIRECT\" } }
chute.provider \"p\" { $U }" 'main.lua:3: chute.provider "p": declare providers before groups'
bad "use names a provider" 'chute.group "g" { type = "select", use = { "nope" } }' "use\\[1\\]: 'nope' is not a provider declared above"
bad "a ruleset needs a url" 'chute.ruleset { format = "surge" }' 'main.lua:2: chute.ruleset \{ url = ... \}: needs a url'
bad "two remotes, one cache" "chute.ruleset { $U, path = \"a\" }
chute.ruleset { url = \"http://127.0.0.1:9/y\", path = \"a\" }" "main.lua:3: cache .*/state/cache/a is also a's \\(declared at .*main.lua:2\\)"

run route "chute.provider \"p\" { $U }
local rs = chute.ruleset { $U, path = \"ads.list\" }
chute.group \"g\" { type = \"select\", use = { \"p\" } }
function chute.route(f) if rs:match(f) then return \"REJECT\" end return \"g\" end" ads.test
has "no caches: the route still works" "$out" "^g${T}route"
has "the provider says it has none" "$log" "main.lua:2: provider p: no cache yet \(.*/state/cache/provider-p\): no proxies until the first fetch"
has "the ruleset too" "$log" "main.lua:3: ruleset ads.list: no cache yet .*: empty until the first fetch"
has "the empty group rejects" "$log" 'chute.group "g": its providers have no proxies yet: it rejects until they do'

mkdir -p "$CHUTE_STATE_DIR/cache"
printf 'DOMAIN-SUFFIX,ads.test\n' >"$CHUTE_STATE_DIR/cache/ads.list"
cat >"$CHUTE_STATE_DIR/cache/provider-p" <<'YAML'
proxies:
  - { name: hk, type: socks5, server: 127.0.0.1, port: 1 }
  - { name: hk, type: socks5, server: 127.0.0.1, port: 2 }
  - { name: g, type: socks5, server: 127.0.0.1, port: 3 }
  - { name: DIRECT, type: socks5, server: 127.0.0.1, port: 4 }
  - { name: us, type: socks5, server: 127.0.0.1, port: 5 }
  - { name: bad, type: ss, server: 127.0.0.1, port: 6, cipher: rc4-md5, password: x }
YAML
run route "chute.provider \"p\" { $U, filter = \"^(hk|g|DIRECT|bad)\" }
local rs = chute.ruleset { $U, path = \"ads.list\" }
chute.group \"g\" { type = \"select\", use = { \"p\" } }
function chute.route(f) if rs:match(f) then return \"REJECT\" end return \"g\" end" x.ads.test
has "the cached list decides" "$out" "^REJECT${T}route ads.list:1"
has "the provider's cache is read" "$log" "provider p: 5 proxies from its cache \(clash\), 1 left out by its filter"
has "a second hk is hk 2" "$log" "provider p: 'hk' is taken: this one is 'hk 2'"
has "DIRECT is the engine's" "$log" "provider p: 'DIRECT' is taken: this one is 'DIRECT 2'"
has "a proxy chute cannot set up is left out" "$log" "provider p: proxy 'bad': unknown cipher 'rc4-md5'.*; left out"
has "the bundle's group g wins over the provider's proxy g" "$log" "provider p: its proxy 'g' is now 'g 2': the bundle declares 'g'"
run route "chute.provider \"p\" { $U }
chute.group \"g\" { type = \"select\", use = { \"p\" } }
chute.select(\"g\", \"hk 2\")
function chute.route(f) return \"g\" end" x.test
has "the provider's proxies are the group's members" "$out" "^g${T}route"
[ "$rc" -eq 0 ] || { echo "FAIL select hk 2: $log"; failed=1; }
exit $failed
