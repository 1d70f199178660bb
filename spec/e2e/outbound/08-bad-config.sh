#!/usr/bin/env bash
# `chute check` on bundles with proxy and group mistakes: each exits
# non-zero and its message names main.lua:LINE of the mistake and what is
# wrong. A correct bundle with every proxy type and group type passes.
# No root, no sockets.
. "$(dirname "$0")/../lib.sh"
e2e_init

HEAD='local chute = require "chute"
chute.config { listen = { socks = "127.0.0.1:1080" } }'
SS='type = "shadowsocks", server = "192.0.2.1", port = 8388, cipher = "aes-128-gcm", password = "pw"'

# bad CASE_NAME REGEX <<LUA: the body after HEAD; the mistake sits on the
# line marked "-- here"; the message must match REGEX. Every case runs;
# the failures are listed at the end.
FAILED=()
bad() {
    local name=$1 re=$2 out rc=0 line
    mkdir -p "$E2E_TMP/$name"
    { echo "$HEAD"; cat; } >"$E2E_TMP/$name/main.lua"
    line=$(line_of "-- here" "$E2E_TMP/$name/main.lua")
    out=$("$CHUTE" check "$E2E_TMP/$name" 2>&1) || rc=$?
    out=${out//$E2E_TMP\/$name\//}
    check "$name: exit status non-zero, the message names main.lua:$line and matches /$re/"
    if [ "$rc" -eq 0 ]; then
        FAILED+=("$name: chute check passed ($out)")
    elif [ "$rc" -ge 128 ]; then
        FAILED+=("$name: chute check died of a signal (status $rc): $out")
    elif ! grep -q -F "main.lua:$line:" <<<"$out"; then
        FAILED+=("$name: no main.lua:$line: in '$out'")
    elif ! grep -q -E -- "$re" <<<"$out"; then
        FAILED+=("$name: /$re/ not in '$out'")
    else
        say "$name -> $(head -n 1 <<<"$out")"
    fi
}

bad unknown-type "unknown type 'vmess'" <<'LUA'
chute.proxy "v" { type = "vmess", server = "192.0.2.1", port = 443 } -- here
LUA
bad missing-type "needs a type" <<'LUA'
chute.proxy "v" { server = "192.0.2.1", port = 443 } -- here
LUA
bad missing-port "port" <<'LUA'
chute.proxy "s" { type = "socks5", -- here (a call spanning lines is reported at its first)
                  server = "192.0.2.1" }
LUA
bad port-range "port" <<'LUA'
chute.proxy "s" { type = "socks5", server = "192.0.2.1", port = 70000 } -- here
LUA
bad port-string "'port'.*expected number, got string" <<'LUA'
chute.proxy "s" { type = "socks5", server = "192.0.2.1", port = "1080" } -- here
LUA
bad missing-server "server" <<'LUA'
chute.proxy "s" { type = "socks5", port = 1080 } -- here
LUA
bad bad-server "server" <<'LUA'
chute.proxy "s" { type = "socks5", server = "not a host!", port = 1080 } -- here
LUA
bad unknown-cipher "unknown cipher 'rc4-md5'" <<'LUA'
chute.proxy "ss" { type = "shadowsocks", server = "192.0.2.1", port = 8388, -- here
                   cipher = "rc4-md5", password = "pw" }
LUA
bad ss-no-password "password" <<'LUA'
chute.proxy "ss" { type = "shadowsocks", server = "192.0.2.1", port = 8388, cipher = "aes-256-gcm" } -- here
LUA
bad trojan-no-password "password" <<'LUA'
chute.proxy "tj" { type = "trojan", server = "192.0.2.1", port = 443 } -- here
LUA
bad unknown-field "unknown field 'passwd'" <<'LUA'
chute.proxy "s" { type = "socks5", server = "192.0.2.1", port = 1080, passwd = "x" } -- here
LUA
bad field-of-other-type "unknown field 'cipher'" <<'LUA'
chute.proxy "s" { type = "socks5", server = "192.0.2.1", port = 1080, cipher = "aes-128-gcm" } -- here
LUA
bad user-without-password "username and password" <<'LUA'
chute.proxy "s" { type = "socks5", server = "192.0.2.1", port = 1080, username = "u" } -- here
LUA
bad name-taken "name is taken" <<LUA
chute.proxy "p" { $SS }
chute.proxy "p" { $SS } -- here
LUA
bad name-direct "DIRECT.*name is taken" <<LUA
chute.proxy "DIRECT" { $SS } -- here
LUA
bad group-name-taken "name is taken" <<LUA
chute.proxy "p" { $SS }
chute.group "p" { type = "select", proxies = { "p" } } -- here
LUA
bad group-undeclared "'nope' is not DIRECT, REJECT or a proxy declared above" <<LUA
chute.proxy "p" { $SS }
chute.group "g" { type = "fallback", proxies = { "p", "nope" } } -- here
LUA
bad group-declared-below "chute.proxy \"late\": declare proxies before groups \(group \"g\" at [^ ]*main.lua:[0-9]+ names it\)" <<LUA
chute.proxy "p" { $SS }
chute.group "g" { type = "fallback", proxies = { "p", "late" } }
chute.proxy "late" { $SS } -- here
LUA
bad group-of-group "'g1'" <<LUA
chute.proxy "p" { $SS }
chute.group "g1" { type = "select", proxies = { "p" } }
chute.group "g2" { type = "select", proxies = { "g1" } } -- here
LUA
bad group-type "'random'" <<LUA
chute.proxy "p" { $SS }
chute.group "g" { type = "random", proxies = { "p" } } -- here
LUA
bad group-empty "proxies" <<LUA
chute.proxy "p" { $SS }
chute.group "g" { type = "fallback", proxies = {} } -- here
LUA
bad urltest-no-url "url" <<LUA
chute.proxy "p" { $SS }
chute.group "g" { type = "url-test", proxies = { "p" } } -- here
LUA
bad https-url "https" <<LUA
chute.proxy "p" { $SS }
chute.group "g" { type = "fallback", proxies = { "p" }, url = "https://example.com/" } -- here
LUA
bad interval-tiny "interval" <<LUA
chute.proxy "p" { $SS }
chute.group "g" { type = "fallback", proxies = { "p" }, url = "http://example.com/", interval = 0.01 } -- here
LUA
bad selected-not-member "selected" <<LUA
chute.proxy "p" { $SS }
chute.proxy "q" { $SS }
chute.group "g" { type = "select", proxies = { "p" }, selected = "q" } -- here
LUA
bad select-not-select-group "not a select group" <<LUA
chute.proxy "p" { $SS }
chute.group "g" { type = "fallback", proxies = { "p", "DIRECT" } }
chute.select("g", "p") -- here
LUA
bad select-unknown-member "no member 'DIRECT'" <<LUA
chute.proxy "p" { $SS }
chute.group "g" { type = "select", proxies = { "p" } }
chute.select("g", "DIRECT") -- here
LUA
bad proxy-after-group "before groups" <<LUA
chute.proxy "p" { $SS }
chute.group "g" { type = "select", proxies = { "p" } }
chute.proxy "q" { $SS } -- here
LUA

bad pool-type "pool: expected false, true or" <<LUA
chute.proxy "p" { $SS, pool = 8 } -- here
LUA

bad pool-max-idle "pool.max_idle: expected an integer 1..64" <<LUA
chute.proxy "p" { $SS, pool = { max_idle = 0 } } -- here
LUA

bad pool-idle-timeout "pool.idle_timeout: expected seconds" <<LUA
chute.proxy "p" { $SS, pool = { idle_timeout = -1 } } -- here
LUA

bad pool-unknown-field "pool: unknown field 'size'" <<LUA
chute.proxy "p" { $SS, pool = { size = 4 } } -- here
LUA

check "a correct bundle with every proxy type and group type passes"
mkdir -p "$E2E_TMP/good"
cat >"$E2E_TMP/good/main.lua" <<LUA
$HEAD
chute.proxy "ss1" { $SS, pool = { max_idle = 4, idle_timeout = 20 } }
chute.proxy "ss2" { type = "ss", server = "ss.example", port = 8388, cipher = "chacha20-ietf-poly1305", password = "pw", udp = false }
chute.proxy "ss3" { type = "shadowsocks", server = "2001:db8::1", port = 8388, cipher = "aes-256-gcm", password = "pw" }
chute.proxy "s5" { type = "socks5", server = "192.0.2.2", port = 1080, username = "u", password = "p", udp = true }
chute.proxy "h" { type = "http", server = "192.0.2.3", port = 3128 }
chute.proxy "hs" { type = "https", server = "proxy.example", port = 443, username = "u", password = "p" }
chute.proxy "tj" { type = "trojan", server = "192.0.2.4", port = 443, password = "pw", sni = "t.example", pool = false }
chute.group "sel" { type = "select", proxies = { "ss1", "s5", "DIRECT" }, selected = "s5" }
chute.group "fb" { type = "fallback", proxies = { "ss1", "ss2", "DIRECT" }, url = "http://192.0.2.9/gen204", interval = 60 }
chute.group "ut" { type = "url-test", proxies = { "ss1", "ss3", "tj" }, url = "http://[2001:db8::9]:8080/", tolerance = 30, timeout = 3 }
chute.group "lb" { type = "load-balance", proxies = { "h", "hs", "REJECT" } }
chute.select("sel", "DIRECT")
function chute.route(flow) return "fb" end
LUA
out=$("$CHUTE" check "$E2E_TMP/good" 2>&1) || fail "chute check failed on a correct bundle: $out"
say "good bundle: ${out:-ok}"
check "chute route on the correct bundle names the group"
out=$("$CHUTE" route "$E2E_TMP/good" 192.0.2.50:80 2>&1) || fail "chute route failed: $out"
assert_match "fb" "$out" "chute route's answer"
if [ "${#FAILED[@]}" -gt 0 ]; then
    printf '  %s\n' "${FAILED[@]}" >&2
    fail "${#FAILED[@]} bad bundle(s) not reported as they should be (above)"
fi
e2e_pass
