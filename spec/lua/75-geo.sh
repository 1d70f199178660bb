#!/usr/bin/env bash
# GEOIP, SRC-GEOIP, IP-ASN and GEOSITE (issue 17): `chute route` decisions
# against an mmdb and a geosite.dat made here by the test-only writers in
# spec/fixtures/geo (checked with mmdblookup when mmdb-bin is there), in
# chute.rules and in a rule list; GEOIP,LAN without a file; each schema
# users' mmdb files have; missing, corrupt and wrong files refused at load
# with their path and the reason.
#
# Env: CHUTE and CHUTE_TOP (see lib/common.sh). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

GEO=$CHUTE_TOP/spec/fixtures/geo
mk() { python3 "$GEO/mkmmdb.py" "$@" || { echo "FAIL mkmmdb $*"; exit 1; }; }
B=$tmp/geo
cp -r "$BUNDLES/geo" "$B"
mk "$B/Country.mmdb" 114.114.0.0/16=CN 8.8.8.0/24=US 1.0.0.0/24=au 203.0.113.0/24=JP \
    127.0.0.0/8=ZZ 240e::/20=CN
mk "$B/asn.mmdb" --schema asn --record 28 1.1.1.0/24=13335:Cloudflare 198.51.100.0/24=64500
python3 "$GEO/mkgeosite.py" "$B/geosite.dat" "$B/sites.txt" || { echo "FAIL mkgeosite"; exit 1; }

# The writer's files read back as written, through libmaxminddb's own tool.
if command -v mmdblookup >/dev/null; then
    got=$(mmdblookup -f "$B/Country.mmdb" -i 114.114.114.114 country iso_code | tr -d ' \n')
    [ "$got" = '"CN"<utf8_string>' ] && echo "ok   mmdblookup reads the written country" ||
        { echo "FAIL mmdblookup: $got"; failed=1; }
    got=$(mmdblookup -f "$B/asn.mmdb" -i 1.1.1.1 autonomous_system_number | tr -d ' \n')
    [ "$got" = '13335<uint32>' ] && echo "ok   mmdblookup reads the written ASN (28-bit records)" ||
        { echo "FAIL mmdblookup: $got"; failed=1; }
elif [ "${CI:-}" = true ]; then
    echo "FAIL mmdblookup missing (mmdb-bin, scripts/bootstrap)"; failed=1
fi

run() { # BUNDLE ARGS...: chute from $tmp, so messages name the bundle's folder
    (cd "$tmp" && timeout 30 "$CHUTE" "$@") >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    log=$(sed -E 's/^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]{12} //' "$tmp/err")
}
decides() { # DEST WANT [route options]
    local dest=$1 want=$2
    shift 2
    run route "$@" geo "$dest"
    expect "$dest ${*:+($*) }-> $want" 0 "$want" ""
}
decides x.ads.test "REJECT${T}route rule 1 GEOSITE,ads"
decides doubleclick.example "REJECT${T}route rule 1 GEOSITE,ads"
decides track12.test "REJECT${T}route rule 1 GEOSITE,ads"
decides track.test "DIRECT${T}route rule 11 FINAL${T}resolved track.test: no address"
decides www.google.cn.test "DIRECT${T}route rule 2 GEOSITE,google@cn"
decides a.google-cn.test "DIRECT${T}route rule 2 GEOSITE,google@cn"
decides mail.google.test "REJECT${T}route rule 3 GEOSITE,GOOGLE"
decides unused.test "DIRECT${T}route rule 11 FINAL${T}resolved unused.test: no address"
decides 10.1.2.3 "DIRECT${T}route rule 4 GEOIP,LAN"
decides '[fe80::1]:80' "DIRECT${T}route rule 4 GEOIP,LAN"
decides 1.1.1.1 "REJECT${T}route rule 5 IP-ASN,13335"
decides 114.114.114.114 "DIRECT${T}route rule 6 GEOIP,cn"
decides '[240e::1]:443' "DIRECT${T}route rule 6 GEOIP,cn"
decides '[::ffff:114.114.1.1]:443' "DIRECT${T}route rule 6 GEOIP,cn"
decides 8.8.8.8 "REJECT${T}route rule 7 GEOIP,US"
decides 9.9.9.9:2222 "REJECT${T}route rule 8 AND"
decides 9.9.9.9 "DIRECT${T}route rule 11 FINAL"
decides 203.0.113.5 "REJECT${T}route rule 9 geo.list:2"
decides 198.51.100.7 "REJECT${T}route rule 9 geo.list:3"
decides listed.test "REJECT${T}route rule 9 geo.list:4${T}resolved listed.test: no address"
# A name resolves for GEOIP rules without no-resolve (the hosts file's
# localhost: 127.0.0.1, ZZ in this file); GEOIP,LAN says no-resolve.
decides localhost "REJECT${T}route rule 10 GEOIP,ZZ${T}resolved localhost: 127.0.0.1"

# The schemas of the files users have: MaxMind's country.iso_code,
# ip-location-db's flat country_code, sing-geoip's bare code, Meta-geoip0's
# list of codes; IPv4-only files; 24/28/32-bit records.
schema() { # WHAT MKMMDB-ARGS...
    local what=$1
    shift
    mk "$B/Country.mmdb" "$@"
    run route geo 114.114.114.114
    expect "$what" 0 "DIRECT${T}route rule 6 GEOIP,cn" ""
}
schema "flat country_code (32-bit records)" --schema flat --record 32 114.114.0.0/16=CN
schema "sing-geoip (a bare code)" --schema sing 114.114.0.0/16=CN
schema "Meta-geoip0 (a list of codes)" --schema meta 114.114.0.0/16=private+cn
schema "an IPv4-only file" --ip 4 --record 28 114.0.0.0/8=CN

# Bad files: the load stops, naming the file and why.
mk "$B/Country.mmdb" 114.114.0.0/16=CN
cp -r "$B" "$tmp/bad"
head -c 2000 /dev/urandom >"$tmp/bad/Country.mmdb"
run check bad
expect "a corrupt mmdb is refused" 1 "" \
    "chute: bad/main.lua:5: chute.config: geo.mmdb: bad/Country.mmdb: The MaxMind DB file contains invalid metadata"
rm "$tmp/bad/Country.mmdb"
run check bad
expect "a missing mmdb is refused" 1 "" \
    "chute: bad/main.lua:5: chute.config: geo.mmdb: bad/Country.mmdb: No such file or directory"
cp "$B/Country.mmdb" "$tmp/bad/"
printf 'not protobuf at all' >"$tmp/bad/geosite.dat"
run check bad
expect "a geosite.dat that is not protobuf is refused" 1 "" \
    "chute: bad/main.lua:5: chute.config: geo.geosite: bad/geosite.dat: not a geosite.dat: at byte 0: field 13: wire type 6 (not a geosite.dat?)"
head -c 40 "$B/geosite.dat" >"$tmp/bad/geosite.dat"
run check bad
expect "a cut geosite.dat is refused" 1 "" \
    "chute: bad/main.lua:5: chute.config: geo.geosite: bad/geosite.dat: not a geosite.dat: at byte 0: field 1: length 59 past the end (38 bytes left)"
cp "$B/geosite.dat" "$tmp/bad/"
sed -i 's/"GEOSITE", "ads"/"GEOSITE", "adz"/' "$tmp/bad/main.lua"
run check bad
expect "a site the file lacks is refused" 1 "" \
    "chute: bad/main.lua:5: chute.config: geo.geosite: bad/geosite.dat: GEOSITE,adz (chute.rules: rule 1): the file has no site 'adz' (it has 4 sites; names as in v2fly's domain-list-community: cn, google, category-ads-all, ...)"

mk "$tmp/bad/Country.mmdb" --schema asn 1.1.1.0/24=13335
sed -i 's/"GEOSITE", "adz"/"GEOSITE", "ads"/' "$tmp/bad/main.lua"
run route bad 114.114.114.114
expect "an ASN file given as geo.mmdb loads with a warning" 0 "DIRECT${T}route rule 11 FINAL" \
    "warn  geo: geo.mmdb: bad/Country.mmdb is a GeoLite2-ASN database: GEOIP rules will not match (it belongs in geo.asn)"

# Without geo = {...}: the names mihomo keeps, in the bundle; a rule that
# needs a file says which and where it looked.
mkdir -p "$tmp/nogeo"
cat >"$tmp/nogeo/main.lua" <<'LUA'
local chute = require "chute"
chute.route = chute.rules {
  {"GEOIP", "LAN", "DIRECT"},
  {"GEOIP", "CN", "DIRECT"},
  {"FINAL", "REJECT"},
}
LUA
run check nogeo
expect "GEOIP without a file names the default path" 1 "" \
    "chute: GEOIP rules need a country database (.mmdb) (the first: chute.rules: rule 2): nogeo/Country.mmdb: No such file or directory (geo.mmdb in chute.config names the file)"
cp "$B/Country.mmdb" "$tmp/nogeo/country.mmdb"
run route nogeo 114.114.114.114
expect "the default Country.mmdb is found in either case" 0 "DIRECT${T}route rule 2 GEOIP,CN" ""
sed -i '4d' "$tmp/nogeo/main.lua"
rm "$tmp/nogeo/country.mmdb"
run route nogeo 192.168.1.1
expect "GEOIP,LAN needs no file" 0 "DIRECT${T}route rule 1 GEOIP,LAN" ""

cp -r "$B" "$tmp/bad-key"
sed -i 's/geosite = "geosite.dat"/geoip = "GeoIP.dat"/' "$tmp/bad-key/main.lua"
run check bad-key
expect "an unknown geo key lists the known ones" 1 "" \
    "chute: bad-key/main.lua:5: chute.config: unknown key 'geo.geoip' (known: asn, geosite, mmdb)"

# geo.mmdb = { url = ... }: read from its cache at load, never fetched
# then; bad tables refused with the key's place.
remote() { # NAME MMDB-VALUE: a copy of the bundle with that geo.mmdb
    cp -r "$B" "$tmp/$1"
    sed -i "s|mmdb = \"Country.mmdb\"|mmdb = $2|" "$tmp/$1/main.lua"
}
export CHUTE_STATE_DIR=$tmp/state
remote r-key '{ uri = "http://127.0.0.1:9/C.mmdb" }'
run check r-key
expect "a remote geo file's unknown key lists the known ones" 1 "" \
    "chute: r-key/main.lua:5: chute.config: unknown key 'geo.mmdb.uri': did you mean 'url'? (known: interval, max_size, path, url, via)"
remote r-nourl '{ interval = 60 }'
run check r-nourl
expect "a remote geo file needs its url" 1 "" \
    "chute: r-nourl/main.lua:5: chute.config: geo.mmdb: a table needs url = \"https://...\" (or give a file's path as a string)"
remote r-ftp '{ url = "ftp://127.0.0.1/C.mmdb" }'
run check r-ftp
expect "a remote geo file's url is http(s)" 1 "" \
    "chute: r-ftp/main.lua:5: chute.config: geo.mmdb.url: url 'ftp://127.0.0.1/C.mmdb': http:// or https:// only"
remote r-via "{ url = \"http://127.0.0.1:9/C.mmdb\", via = \"nowhere\", path = \"$B/Country.mmdb\" }"
run check r-via
expect "a remote geo file's via is a policy" 1 "" \
    "chute: r-via/main.lua:5: chute.config geo.mmdb: via 'nowhere' is not a policy of the bundle (DIRECT, a proxy or a group)"
remote r-none '{ url = "http://127.0.0.1:9/C.mmdb", path = "C.mmdb" }'
run route r-none 114.114.114.114
expect "a remote mmdb with no cache yet: GEOIP matches nothing, no fetch" 0 "DIRECT${T}route rule 11 FINAL" \
    "warn  r-none/main.lua:5: geo.mmdb: no cache yet ($tmp/state/cache/C.mmdb): GEOIP rules match nothing (but GEOIP,LAN) until the first fetch"
mkdir -p "$tmp/state/cache" && cp "$B/Country.mmdb" "$tmp/state/cache/C.mmdb"
run route r-none 114.114.114.114
expect "a remote mmdb is read from its cache" 0 "DIRECT${T}route rule 6 GEOIP,cn" ""
printf 'junk' >"$tmp/state/cache/C.mmdb"
run route r-none 114.114.114.114
expect "a remote mmdb's unusable cache: a warning, GEOIP matches nothing" 0 "DIRECT${T}route rule 11 FINAL" \
    "warn  r-none/main.lua:5: geo.mmdb: cache unusable: $tmp/state/cache/C.mmdb: The MaxMind DB file contains invalid metadata; its rules match nothing until the next fetch"
unset CHUTE_STATE_DIR

# examples/geo as it ships (its stand-in files).
ex() { # DEST WANT
    (cd "$CHUTE_TOP" && timeout 30 "$CHUTE" route examples/geo "$1") >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    log=$(cat "$tmp/err")
    expect "examples/geo: $1 -> $2" 0 "$2" ""
}
ex x.ads.example "REJECT${T}route rule 1 GEOSITE,category-ads-all"
ex www.example.cn "DIRECT${T}route rule 2 GEOSITE,cn"
ex 192.168.1.5 "DIRECT${T}route rule 3 GEOIP,LAN"
ex 223.5.5.5 "DIRECT${T}route rule 4 GEOIP,CN"
ex '[240e::8]:443' "DIRECT${T}route rule 4 GEOIP,CN"
ex 8.8.8.8 "proxy${T}route rule 5 FINAL"

exit $failed
