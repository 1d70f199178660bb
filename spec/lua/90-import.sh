#!/usr/bin/env bash
# chute import and chute.clash / chute.surge (issue 17): a mihomo config and
# a Surge profile written as bundles match their golden main.lua, load, and
# decide as mihomo and Surge would for a table of destinations (expected
# decisions written by hand from each file's rule order); both ways (the
# imported bundle, and the config run in place by chute.clash/chute.surge)
# decide alike. Bad input names file:line and the reason.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
IMP=$CHUTE_TOP/spec/lua/import

same_file() { # WHAT GOLDEN GOT
    if diff -u "$2" "$3" >"$tmp/diff"; then
        echo "ok   $1"
    else
        echo "FAIL $1"
        sed 's/^/     /' "$tmp/diff"
        failed=1
    fi
}

imports() { # NAME CONFIG: chute import into $tmp/NAME, checked against NAME.golden.lua
    local name=$1 cfg=$2
    (cd "$IMP/${cfg%/*}" && "$CHUTE" import --quiet "${cfg##*/}" -o "$tmp/$name") >"$tmp/out" 2>&1
    rc=$?
    [ $rc -eq 0 ] && echo "ok   $name: imported" || { echo "FAIL $name: import exit $rc"; cat "$tmp/out"; failed=1; }
    same_file "$name: main.lua is the golden one" "$IMP/$name.golden.lua" "$tmp/$name/main.lua"
}

loads() { # BUNDLE
    (cd "$tmp" && "$CHUTE" check "$1") >"$tmp/out" 2>"$tmp/err"
    if grep -q "^ok: " "$tmp/out"; then echo "ok   $1 loads (chute check)"
    else echo "FAIL $1 does not load"; cat "$tmp/err"; failed=1; fi
}

# decide BUNDLE_A BUNDLE_B TABLE: each line "DEST POLICY [route options]";
# both bundles must give POLICY.
decide() {
    local a=$1 b=$2 n=0 bad=0 dest want rest opts got
    while read -r dest want rest; do
        case $dest in ''|'#'*) continue ;; esac
        opts=${rest%%#*}
        n=$((n + 1))
        for bundle in "$a" "$b"; do
            # shellcheck disable=SC2086
            got=$(timeout 30 "$CHUTE" route $opts "$bundle" "$dest" 2>/dev/null | cut -f1)
            if [ "$got" != "$want" ]; then
                echo "FAIL ${bundle##*/} $dest ${opts:+($opts) }-> '$got', want $want"
                bad=1
            fi
        done
    done
    [ $bad -eq 0 ] && echo "ok   $n destinations decide as the original's rules say, both ways" || failed=1
}

# ---- mihomo ------------------------------------------------------------
imports mihomo mihomo/config.yaml
[ -f "$tmp/mihomo/rules/ads.yaml" ] && [ -f "$tmp/mihomo/rules/lan.txt" ] \
    && echo "ok   mihomo: the rule providers' files are beside main.lua" \
    || { echo "FAIL mihomo: rule lists not copied"; failed=1; }
loads mihomo
chute check import/mihomo
[ $rc -eq 0 ] && echo "ok   chute.clash \"config.yaml\" loads" || { echo "FAIL chute.clash: $log"; failed=1; }
case $log in *"chute.clash: config.yaml:37: proxy 'us-vmess': chute has no vmess protocol: left out"*)
    echo "ok   chute.clash lists what it left out with file:line" ;;
*) echo "FAIL chute.clash notes: $log"; failed=1 ;; esac

# The rules as mihomo reads them, first match wins. Names that no rule
# before GEOIP,CN takes are avoided (GEOIP would resolve them); the IPs
# that reach it are documentation ranges, in no country.
decide "$tmp/mihomo" "$BUNDLES/import/mihomo" <<'EOF_T'
ads.example.com            REJECT      # rule 1 DOMAIN
ADS.EXAMPLE.COM            REJECT      # names compare without case
ads.example.com:80         REJECT
doubleclick.net            REJECT      # rule 2 RULE-SET ads: +.doubleclick.net is the name too
stats.g.doubleclick.net    REJECT
tracker.example.org        REJECT
x.adservice.example        REJECT
www.netflix.com            Streaming   # rule 3
netflix.com                Streaming
api-global.netflix.com     Streaming
www.netflix.com:80         Streaming
ipv4-c001.nflxvideo.net    Streaming   # rule 4
www.google.com             Proxy       # rule 5 DOMAIN-KEYWORD
google.co.jp               Proxy
mail.googleusercontent.com Proxy
ads.google.cn              Proxy       # rule 5 comes before DOMAIN-SUFFIX,cn
www.google.com:80          Proxy
youtube.googleapis.com     Proxy
github.com                 auto        # rule 6
api.github.com             auto
codeload.github.com        auto
github.com:22              auto        # before DST-PORT,22
baidu.cn                   DIRECT      # rule 7
www.gov.cn                 DIRECT
foo.bar.cn                 DIRECT
nas.home.arpa              home-socks  # rule 8
home.arpa                  home-socks
x.home.arpa:22             home-socks
x.vmess-only.example:22    REJECT      # mihomo: us-vmess; chute has no vmess, so rule 9 is left out (noted) and DST-PORT,22 decides
game.example               DIRECT      --network udp
x.game.example             DIRECT      --network udp
game.example:22            REJECT      # TCP: the AND fails, DST-PORT,22
git.example:22             REJECT      # rule 11
192.168.1.10:22            REJECT      # DST-PORT before the lan list
203.0.113.9:22             REJECT
[2001:db8::22]:22          REJECT
172.16.0.1:22              REJECT
192.168.1.10:80            DIRECT      # rule 12 RULE-SET lan
192.168.0.1                DIRECT
10.0.0.1                   DIRECT
10.99.1.1                  DIRECT      # lan before SRC-IP-CIDR
172.16.0.1                 DIRECT
172.31.255.255             DIRECT
203.0.113.1                Proxy       # rule 13
203.0.113.254:8080         Proxy
[2001:db8::1]              auto        # rule 14
[2001:db8:ffff::1]:80      auto
198.51.100.7               Proxy       # MATCH
192.0.2.1                  Proxy
[3fff::1]:443              Proxy
EOF_T

# ---- Surge ------------------------------------------------------------
imports surge surge/profile.conf
same_file "surge: the rewrite sections are a module beside main.lua" "$IMP/surge.golden.sgmodule" \
    "$tmp/surge/profile.sgmodule"
loads surge
chute check import/surge
[ $rc -eq 0 ] && echo "ok   chute.surge \"profile.conf\" loads" || { echo "FAIL chute.surge: $log"; failed=1; }
decide "$tmp/surge" "$BUNDLES/import/surge" <<'EOF_T'
ad.example.com             REJECT      # DOMAIN
AD.EXAMPLE.COM             REJECT
ad.example.com:80          REJECT
x.ads.example.net          REJECT      # RULE-SET reject.list (REJECT-TINYGIF refuses as REJECT)
ads.example.net            REJECT
myadtracker.example        REJECT
adtracking.example.org     REJECT
198.18.99.5                REJECT
198.18.99.200:8080         REJECT
cdn.example.org            DIRECT      # DOMAIN-SET: the name itself
a.static.example.org       DIRECT      # DOMAIN-SET .static.example.org: the name and below
static.example.org         DIRECT
x.y.static.example.org     DIRECT
git.corp.example           Work        # DOMAIN-SUFFIX
corp.example               Work
wiki.corp.example:8443     Work
www.youtube.com            Proxy
youtube.com                Proxy
m.youtube.com:80           Proxy
www.youtube.com            Proxy       --network udp
web.telegram.org           Proxy       # DOMAIN-KEYWORD
telegram.me                Proxy
nas.local.example          DIRECT      # OR
local.example              DIRECT
printer.example            DIRECT
192.0.2.99                 Work        # IP-CIDR no-resolve
192.0.2.1:22               Work
198.51.100.1               Proxy
198.51.100.254:443         Proxy
captive.apple.com          DIRECT      # RULE-SET SYSTEM
x.push.apple.com           DIRECT
gs-loc.apple.com           DIRECT
printer.local              DIRECT      # RULE-SET LAN: DOMAIN-SUFFIX,local
192.168.3.3                DIRECT      # RULE-SET LAN
10.1.1.1                   DIRECT
172.20.0.1                 DIRECT
127.0.0.1:8080             DIRECT
100.64.1.1                 DIRECT
[fe80::1]                  DIRECT
203.0.113.5                Proxy       # FINAL
203.0.113.200:80           Proxy
[2001:db8::1]              Proxy
[3fff::5]:443              Proxy
233.252.0.1                Proxy
ad.example.com             REJECT      --network udp
cdn.example.org:80         DIRECT
git.corp.example:22        Work
nas.local.example:8080     DIRECT
198.18.99.1                REJECT
telegram.org               Proxy
EOF_T

# ---- remote providers and geo rules: golden text only -----------------
imports remote remote/config.yaml

# ---- bad input ----------------------------------------------------------
bad() { # WHAT FILE MESSAGE
    (cd "$IMP/bad" && "$CHUTE" import "$2" -o "$tmp/bad") >"$tmp/out" 2>"$tmp/err"
    rc=$?; out=$(cat "$tmp/out"); log=$(cat "$tmp/err")
    expect "$1" 1 "" "chute import: $3"
}
bad "broken YAML names file:line:column (libyaml's mark)" broken.yaml \
    "broken.yaml:4:4: did not find expected '-' indicator (while parsing a block collection from line 2)"
bad "proxies that are not a list" notlist.yaml "notlist.yaml:2: proxies: expected a list (- ...)"
bad "a Surge line before any section" nosection.conf \
    "nosection.conf:1: 'HK = ss, 1.2.3.4, 8388': a line before any section (a Surge profile starts with [General], [Proxy], ...)"
bad "a Surge header without its ]" header.conf \
    "header.conf:1: a section header ends with ']' ([General], [Proxy], [Rule], ...)"
chute check import/bad
expect "chute.clash names the YAML's line" 1 "" \
    "chute: import/bad/main.lua:2: chute.clash: broken.yaml:4:4: did not find expected '-' indicator (while parsing a block collection from line 2)"
chute check import/bad-server
expect "a value chute.proxy refuses names the config's own line" 1 "" \
    "chute: import/bad-server/config.yaml:8: chute.proxy \"typo\": server 'bad host!' is not a name or an IP address"
(cd "$IMP/mihomo" && "$CHUTE" import config.yaml -o "$tmp/mihomo") >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "File exists (--force replaces it)" "$tmp/err" \
    && echo "ok   an existing main.lua is kept without --force" || { echo "FAIL overwrite: $rc"; failed=1; }

exit $failed
