#!/usr/bin/env bash
# chute.ruleset on lists shaped like the public Surge and mihomo ones: rule
# types chute cannot evaluate are left out with one warning per list (count,
# first file:line, type), PCRE regexes with commas, DOMAIN-WILDCARD as
# Surge's manual and mihomo's code have it, a Clash domain list's "*" as one
# label, IN-TYPE, and an ambiguous domain list refused under format auto.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

load_log="warn  chute.ruleset: lists/surge.list: 3 rules of types chute cannot evaluate left out (the first: lists/surge.list:1, USER-AGENT; strict = true makes this an error)
warn  chute.ruleset: lists/meta.yaml: 2 rules of types chute cannot evaluate left out (the first: lists/meta.yaml:5, IP-ASN without geo.asn; strict = true makes this an error)
warn  chute.ruleset: lists/inbound.list: 1 rule of types chute cannot evaluate left out (the first: lists/inbound.list:2, IN-USER; strict = true makes this an error)"

route_is() { # DEST WANT_STDOUT [chute route options]
    local dest=$1 want=$2
    shift 2
    chute route "$@" ruleset-real "$dest"
    expect "$dest $* -> $want" 0 "$want" "$load_log"
}
# DOMAIN-REGEX with \d and {1,3} (a comma) unquoted, CRLF line ends.
route_is ad7.example.com "REJECT${T}route lists/surge.list:2"
route_is ad1234.example.com "DIRECT${T}route"
# Surge DOMAIN-WILDCARD: '*' crosses dots, is not empty before ".wild.test".
route_is x.y.wild.test "REJECT${T}route lists/surge.list:4"
route_is wild.test "DIRECT${T}route"
route_is cdn7.class.test "REJECT${T}route lists/surge.list:6"
route_is cdnx.class.test "DIRECT${T}route"
# mihomo DOMAIN-WILDCARD in a classical payload: '*' crosses dots, '?' one.
route_is a.b.deep.test "REJECT${T}route lists/meta.yaml:2"
route_is w1.glob.test "REJECT${T}route lists/meta.yaml:3"
route_is w12.glob.test "DIRECT${T}route"
route_is trkabc.meta.test "REJECT${T}route lists/meta.yaml:4"
# Clash domain list: ".x" only below x, "*" exactly one label.
route_is subs.test "DIRECT${T}route"
route_is x.subs.test "REJECT${T}route lists/domains.txt:1"
route_is a.one.test "REJECT${T}route lists/domains.txt:2"
route_is a.b.one.test "DIRECT${T}route"
# IN-TYPE,HTTPS/TUN: mihomo's HTTPS is the HTTP listener's CONNECT (chute route --inbound http)
route_is x.test "REJECT${T}route lists/inbound.list:1" --inbound http
route_is x.test "REJECT${T}route lists/inbound.list:1" --inbound tun
route_is x.test "DIRECT${T}route" --inbound socks

chute check ruleset-ambiguous
expect "a domain list of '.name' lines under format auto is refused, naming the choice" 1 "" \
    "chute: ruleset-ambiguous/main.lua:2: chute.ruleset: domains.txt: a domain list with '.name' lines: Surge's DOMAIN-SET reads '.a.com' as a.com and below, a Clash domain list as below a.com only; say which with format = \"domain-set\" or \"domain\""

exit $failed
