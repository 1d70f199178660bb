#!/usr/bin/env bash
# chute.ruleset: rule lists in the formats users have, compiled into C
# matchers at load; rs:match(flow) answers true and the matching line, and
# `chute route` names that line; bad lists name file:line.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

load_log="warn  chute.ruleset: lists/skip.list: 1 invalid lines left out (the first: line 3: unknown rule type 'BOGUS-TYPE')
warn  chute.ruleset: lists/skip.list: 1 rule of types chute cannot evaluate left out (the first: lists/skip.list:2, GEOIP without geo.mmdb; strict = true makes this an error)
info  script: ruleset lists/mixed.list (7 entries)	7	ruleset lists/clash.yaml (3 entries)	1"

route_is() { # DEST WANT_STDOUT
    chute route ruleset "$1"
    expect "$1 -> $2" 0 "$2" "$load_log"
}
route_is exact.test "REJECT${T}route lists/mixed.list:2"
route_is www.exact.test "DIRECT${T}route"
route_is suffix.test "REJECT${T}route lists/mixed.list:3"
route_is a.b.suffix.test "REJECT${T}route lists/mixed.list:3"
route_is notsuffix.test "DIRECT${T}route"
route_is SUFFIX.TEST. "REJECT${T}route lists/mixed.list:3"
route_is bkwz.example "REJECT${T}route lists/mixed.list:4"
route_is 198.51.100.7:80 "REJECT${T}route lists/mixed.list:5"
route_is '[2001:db8:1::5]:80' "REJECT${T}route lists/mixed.list:6"
route_is '[2001:db8:2::5]:80' "DIRECT${T}route"
route_is example.test:8443 "REJECT${T}route lists/mixed.list:7"
route_is re42.test "REJECT${T}route lists/mixed.list:8"
route_is rex.test "DIRECT${T}route"
route_is plus.test "REJECT${T}route lists/clash.yaml:2"
route_is x.plus.test "REJECT${T}route lists/clash.yaml:2"
route_is subs.test "DIRECT${T}route"
route_is x.subs.test "REJECT${T}route lists/clash.yaml:3"
route_is a.one.test "REJECT${T}route lists/clash.yaml:4"
route_is a.b.one.test "DIRECT${T}route"
route_is ok.test "REJECT${T}route lists/skip.list:1"

chute route "$CHUTE_TOP/examples/rules" x.ads.example
expect "examples/rules as it ships: the Surge list rejects" 0 "REJECT${T}route rule 1 rules/ads.list:2" ""
chute route "$CHUTE_TOP/examples/rules" 192.168.1.1:22
expect "examples/rules: the Clash ipcidr list" 0 "DIRECT${T}route rule 3 rules/lan.txt:4" ""
chute route "$CHUTE_TOP/examples/rules" mail.example:25
expect "examples/rules: the AND rule" 0 "REJECT${T}route rule 4 AND" ""
chute route "$CHUTE_TOP/examples/rules" hidden.onion
expect "examples/rules: the function rule" 0 "REJECT${T}route rule 5 function" ""
chute route "$CHUTE_TOP/examples/rules" example.com
expect "examples/rules: FINAL" 0 "DIRECT${T}route rule 6 FINAL" ""

chute check ruleset-bad
expect "a bad line stops the bundle, naming the list's line" 1 "" \
    "chute: ruleset-bad/main.lua:2: chute.ruleset: bad.list:2: missing value after 'DOMAIN-SUFFIX'"

exit $failed
