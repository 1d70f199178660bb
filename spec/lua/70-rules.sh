#!/usr/bin/env bash
# chute.rules { ... }: a Surge/Clash-style rule list compiled into C matchers
# (domain and CIDR rules fused into one set each), first match wins,
# logical rules, rule-sets and Lua functions as rules, FINAL; the deciding
# rule shows in `chute route`; bad rules name their place.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

decides() { # DEST WANT [route options]
    local dest=$1 want=$2
    shift 2
    chute route "$@" rules-decl "$dest"
    expect "$dest ${*:+($*) }-> $want" 0 "$want" ""
}
decides exact.test "REJECT${T}route rule 1 DOMAIN,exact.test"
decides www.exact.test "DIRECT${T}route rule 14 FINAL"
decides DIRECT.TEST. "DIRECT${T}route rule 2 DOMAIN-SUFFIX,direct.test"
decides a.b.direct.test "DIRECT${T}route rule 2 DOMAIN-SUFFIX,direct.test"
decides x.test:22 "REJECT${T}route rule 4 DST-PORT,22"
decides direct.test:22 "DIRECT${T}route rule 2 DOMAIN-SUFFIX,direct.test"
decides my-tracker.test "REJECT${T}route rule 5 DOMAIN-KEYWORD,tracker"
decides x.ads.test "REJECT${T}route rule 6 lists/ads.list:1"
decides x.test:443 "REJECT${T}route rule 7 AND" --network udp
decides x.test:443 "DIRECT${T}route rule 14 FINAL"
decides x.test:8080 "DIRECT${T}route rule 8 NOT"
decides 10.1.2.3:80 "DIRECT${T}route rule 9 IP-CIDR,10.0.0.0/8"
decides '[2001:db8::1]:80' "REJECT${T}route rule 11 IP-CIDR6,2001:db8::/32"
decides fn.test "REJECT${T}route rule 12 function"
decides re7.test "REJECT${T}route rule 13 DOMAIN-REGEX,^re[0-9]+\\.test\$"
decides other.test "DIRECT${T}route rule 14 FINAL"

chute check rules-decl-bad
expect "an unknown policy names the rule" 1 "" \
    "chute: rules-decl-bad/main.lua:4: chute.rules: rule 2: unknown policy 'NOPE'"

# A profile as Surge and mihomo users write it (bundles/rules-real): the
# list parser reads each rule, types chute cannot evaluate never match (one
# warning), the REJECT family refuses, IP rules resolve a name lazily.
real_log="warn  chute.rules: 2 rules of types chute cannot evaluate never match (the first: rule 1, USER-AGENT)"
real() { # DEST WANT [route options]
    local dest=$1 want=$2
    shift 2
    chute route "$@" rules-real "$dest"
    expect "real: $dest ${*:+($*) }-> $want" 0 "$want" "$real_log"
}
real x.y.wild.test "REJECT${T}route rule 2 DOMAIN-WILDCARD,*.wild.test"
real mail.test:587 "REJECT${T}route rule 3 DST-PORT,25/465/587"
real mail.test:25 "REJECT${T}route rule 3 DST-PORT,25/465/587"
real x.test "REJECT${T}route rule 6 IN-TYPE,HTTPS" --inbound http
real b.a-rather-long-name-for-a-domain-suffix-rule.example \
    "REJECT${T}route rule 7 DOMAIN-SUFFIX,a-rather-long-name-for-a-domain-suffix-rule.example"
real 10.1.2.3:80 "DIRECT${T}route rule 8 IP-CIDR,10.0.0.0/8"
real 198.18.0.1:80 "REJECT${T}route rule 10 IP-CIDR,198.18.0.0/15"
real 192.168.7.7:80 "REJECT${T}route rule 9 LAN:2"
real printer.local "REJECT${T}route rule 9 LAN:1"
# localhost (the hosts file) resolves into LAN's 127.0.0.0/8: Surge's LAN
# resolves, for TCP and UDP flows alike.
real localhost "REJECT${T}route rule 9 LAN:5${T}resolved localhost: 127.0.0.1"
real localhost "REJECT${T}route rule 9 LAN:5${T}resolved localhost: 127.0.0.1" --network udp

# The rule being parsed when the error is raised is freed with the rest
# (under the Sanitize build, LeakSanitizer reports it otherwise).
chute check rules-bad-cidr
expect "a bad CIDR names the rule, and leaks nothing" 1 "" \
    "chute: rules-bad-cidr/main.lua:4: chute.rules: rule 2: bad CIDR '10.0.0.0/33'"

chute check rules-misspelt
expect "a misspelt option is an error, as in a list" 1 "" \
    "chute: rules-misspelt/main.lua:3: chute.rules: rule 1: unknown option 'no-reslove' (no-resolve, src or extended-matching): did you mean no-resolve?"

exit $failed
