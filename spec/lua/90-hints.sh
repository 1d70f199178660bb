#!/usr/bin/env bash
# Load-time hints for everyday mistakes (issue 20): each message exactly,
# with the file:line of the bundle. `chute check` refuses what `run`
# refuses (no listener, two listeners on one port) and warns without
# route(); `chute route` exits 3 when its answer is the fallback after
# route() failed; the CLI says what to pass instead of a file.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

# refused WHAT BUNDLE MESSAGE: `chute check BUNDLE` exits 1 with MESSAGE.
refused() {
    chute check "$2"
    expect "$1" 1 "" "chute: $3"
}

# check refuses what run refuses
refused "no listener at all" hint-no-listener \
    "hint-no-listener/main.lua:3: the bundle takes no traffic: give chute.config a listen = {...}, a tun = {...} or a dns = { listen = ... }"
refused "SOCKS5 and HTTP on one port: the second one's line" hint-same-port \
    "hint-same-port/main.lua:6: chute.config: listen.socks 127.0.0.1:7890 and listen.http 127.0.0.1:7890 are on the same port: give each listener a port of its own"
refused "a wildcard takes the port on every address" hint-wildcard-port \
    "hint-wildcard-port/main.lua:7: chute.config: listen.socks 127.0.0.1:5353 and dns.listen 0.0.0.0:5353 are on the same port: give each listener a port of its own"
chute check hint-ports-ok
expect "port 0 twice, one port on two addresses: no clash" 0 "ok: hint-ports-ok" ""
chute check hint-no-route
expect "no route(): loads, with a warning saying what flows get" 0 "ok: hint-no-route" \
    "warn  hint-no-route/main.lua: no chute.route: every flow gets the fallback policy, REJECT (define function chute.route(flow), or chute.route = chute.rules {...})"

# chute route's exit status
chute route hint-route-error fine.test
expect "route() answered: exit 0" 0 "REJECT${T}route" ""
chute route hint-route-error broken.test
expect_fallback "route() failed: exit 3, said on stderr" "fallback: error" \
    "warn  flow 1: route() failed: hint-route-error/main.lua:5: no such table; using DIRECT"
chute route hint-route-error option.test
expect_fallback "a run-time type error shows the value" "fallback: bad options" \
    "warn  flow 1: hint-route-error/main.lua:4: route() option mitm: expected a boolean, got string \"yes\"; using DIRECT"

# policy names
refused "a rule's policy in the wrong case" hint-rule-case \
    "hint-rule-case/main.lua:4: chute.rules: rule 2: unknown policy 'direct': policy names are case-sensitive: did you mean DIRECT?"
refused "fallback in the wrong case: the key's line" hint-fallback-case \
    "hint-fallback-case/main.lua:4: chute.config: fallback: unknown policy \"reject\": policy names are case-sensitive: did you mean REJECT?"
refused "a group member in the wrong case" hint-group-member \
    "hint-group-member/main.lua:4: chute.group \"auto\": proxies[2]: 'JP' is not DIRECT, REJECT or a proxy declared above: policy names are case-sensitive: did you mean 'jp'?"

# misspelt names: the nearest known one
refused "a config key in the wrong case" hint-key-case \
    "hint-key-case/main.lua:4: chute.config: unknown key 'Log_Level': did you mean 'log_level'? (known: budget, control, decision_cache, dns, fallback, geo, listen, log_file, log_format, log_level, lua_memory_mb, memory_limit, mitm, outbound, timeouts, tun)"
refused "a misspelt value of a config key" hint-dns-mode \
    "hint-dns-mode/main.lua:4: chute.config: dns.mode: \"fake_ip\" is not fake-ip or real-ip: did you mean 'fake-ip'?"
refused "a misspelt rule type" hint-rule-type \
    "hint-rule-type/main.lua:3: chute.rules: rule 1: unknown rule type 'DOMAIN-SUFIX': did you mean DOMAIN-SUFFIX?"
refused "a misspelt proxy field: its own line" hint-proxy-field \
    "hint-proxy-field/main.lua:3: chute.proxy \"hk\": unknown field 'passwd' for type shadowsocks: did you mean 'password'? (fields: type, server, port, udp, pool, cipher, password)"

# durations and values in type errors
refused "a duration as a string, deep in the table: its key's line and the number" hint-duration \
    "hint-duration/main.lua:10: chute.config: timeouts.connect: expected a number of seconds, got string \"5s\" (a plain number, not a string: connect = 5)"
refused "milliseconds turned into the key's seconds" hint-duration-ms \
    "hint-duration-ms/main.lua:2: chute.config: timeouts.udp: expected a number of seconds, got string \"1500ms\" (a plain number, not a string: udp = 1.5)"
refused "a group's interval as a string: its own line" hint-group-interval \
    "hint-group-interval/main.lua:4: chute.group \"auto\": field 'interval': expected a number of seconds, got string \"5m\" (a plain number, not a string: interval = 300)"
refused "a proxy port as a string shows the value" hint-proxy-port \
    "hint-proxy-port/main.lua:2: chute.proxy \"hk\": field 'port': expected number, got string \"1080\""

# rules without a policy
refused "a rule without a policy: its own line" hint-rule-no-policy \
    "hint-rule-no-policy/main.lua:6: chute.rules: rule 3 has no policy: {TYPE, VALUE, POLICY}"
refused "FINAL without a policy" hint-final-no-policy \
    "hint-final-no-policy/main.lua:4: chute.rules: rule 2 has no policy: {\"FINAL\", POLICY}"

# names declared twice, groups of groups
refused "a name declared twice: where the first one is" hint-dup-proxy \
    "hint-dup-proxy/main.lua:4: chute.group \"auto\": the name is taken: a group of that name is declared at hint-dup-proxy/main.lua:3"
refused "a group naming a group declared above" hint-group-of-group \
    "hint-group-of-group/main.lua:4: chute.group \"outer\": proxies[1]: 'inner' is a group (declared at hint-group-of-group/main.lua:3): a group's members are proxies, DIRECT and REJECT, not other groups"
refused "a group naming a group declared later" hint-group-later \
    "hint-group-later/main.lua:3: chute.group \"outer\": proxies[2]: 'inner' is a group declared later (at hint-group-later/main.lua:4): a group's members are proxies, DIRECT and REJECT, not other groups"

# the sandbox
refused "os.execute in a bundle" hint-os-execute \
    "hint-os-execute/main.lua:2: os.execute is not available in the sandbox: bundles cannot run programs"

# files instead of a bundle folder
for cmd in run check; do
    chute $cmd hint-no-route/main.lua
    expect "chute $cmd main.lua: pass the folder" 1 "" \
        "chute: hint-no-route/main.lua is a file: pass the bundle's folder, the one that holds main.lua: chute $cmd hint-no-route/"
done
chute route hint-no-route/main.lua example.com
expect "chute route main.lua: pass the folder" 1 "" \
    "chute: hint-no-route/main.lua is a file: pass the bundle's folder, the one that holds main.lua: chute route hint-no-route/"
printf 'mixed-port: 7890\n' >"$tmp/config.yaml"
(cd "$tmp" && timeout 30 "$CHUTE" run config.yaml) >"$tmp/out" 2>"$tmp/err"
rc=$? out=$(cat "$tmp/out") log=$(cat "$tmp/err")
expect "chute run config.yaml: chute import" 1 "" \
    "chute: config.yaml is a Clash config, not a bundle: turn it into one with chute import config.yaml -o BUNDLE/, then chute run BUNDLE/"
printf '[General]\n' >"$tmp/profile.conf"
(cd "$tmp" && timeout 30 "$CHUTE" check profile.conf) >"$tmp/out" 2>"$tmp/err"
rc=$? out=$(cat "$tmp/out") log=$(cat "$tmp/err")
expect "chute check profile.conf: chute import" 1 "" \
    "chute: profile.conf is a Surge config, not a bundle: turn it into one with chute import profile.conf -o BUNDLE/, then chute check BUNDLE/"

exit $failed
