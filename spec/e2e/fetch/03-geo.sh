#!/usr/bin/env bash
# Remote GEO files (chute.config { geo = { mmdb = { url = ... }, geosite =
# { url = ... } } }) served by a local nginx: a first start with no caches
# (GEOIP and GEOSITE rules match nothing), the first fetch swapping the
# mmdb into the running bundle without a reload (its index was built off
# the loop) and reloading the bundle for the geosite (whose sites compile
# off the loop in a reload), the interval's 304s, a
# new file swapped in for new flows (the decision cache dropped), a file
# that is not an mmdb / geosite.dat and one over max_size each keeping the
# old one, and a restart from the caches with the server down.
. "$(dirname "$0")/../lib.sh"

e2e_init
need_cmd python3
origin_start
export CHUTE_STATE_DIR=$E2E_TMP/state
CACHE=$CHUTE_STATE_DIR/cache
GEO=$CHUTE_TOP/spec/fixtures/geo
U=http://127.0.0.1:$ORIGIN_PORT

# v1: 127.0.0.0/8 is AA and site "test" holds a.test; v2: 127/8 is BB and
# "test" holds b.test.
python3 "$GEO/mkmmdb.py" "$E2E_TMP/v1.mmdb" 127.0.0.0/8=AA 198.51.100.0/24=CC >/dev/null
python3 "$GEO/mkmmdb.py" "$E2E_TMP/v2.mmdb" 127.0.0.0/8=BB 198.51.100.0/24=CC >/dev/null
printf '[TEST]\nfull:a.test\n' >"$E2E_TMP/v1.txt"
printf '[TEST]\nfull:b.test\n[OTHER]\ndomain:other.test\n' >"$E2E_TMP/v2.txt"
python3 "$GEO/mkgeosite.py" "$E2E_TMP/v1.dat" "$E2E_TMP/v1.txt" >/dev/null
python3 "$GEO/mkgeosite.py" "$E2E_TMP/v2.dat" "$E2E_TMP/v2.txt" >/dev/null
serve() { cp "$1" "$WWW/$2.new" && mv "$WWW/$2.new" "$WWW/$2"; }
serve "$E2E_TMP/v1.mmdb" Country.mmdb
serve "$E2E_TMP/v1.dat" GeoSite.dat

bundle_write "geo = { mmdb = { url = \"$U/Country.mmdb\", interval = 2, max_size = 65536 },
        geosite = { url = \"$U/GeoSite.dat\", interval = 2, path = \"geo/site.dat\" } }," <<'LUA'
chute.route = chute.rules {
  { "GEOIP", "AA", "REJECT" },
  { "GEOSITE", "test", "REJECT" },
  { "FINAL", "DIRECT" },
}
LUA

# origin: what a GET of /small to 127.0.0.1 (by address: GEOIP decides) gets.
origin() {
    curl --silent --max-time 5 -x "socks5://127.0.0.1:$SOCKS_PORT" "$U/small" || echo refused
}
HELLO="hello from the e2e origin"

check "a first start with no caches: both say so, and their rules match nothing"
chute_start
assert_log "geo.mmdb: no cache yet .*GEOIP rules match nothing" "the mmdb has no cache yet"
assert_log "geo.geosite: no cache yet .*GEOSITE rules match nothing" "the geosite has none"

check "the first fetches: each file checked; the mmdb swapped in, the geosite by a reload"
assert_log "geo file geo.mmdb: fetched [0-9]+ bytes, GeoLite2-Country, built [0-9-]+; cache $CACHE/geo-mmdb-" "the mmdb fetched and checked" 10
assert_log "geo file geo.geosite: fetched [0-9]+ bytes, 1 sites; cache $CACHE/geo/site.dat" "the geosite fetched" 10
assert_log "geo.mmdb updated: swapped in \(rule version" "the mmdb swapped in" 10
assert_log "geo.geosite updated: reloading the bundle" "the geosite reloads the bundle" 10
assert_log "reloaded" "the reload done" 10
assert_eq 1 "$(log_count "geo.mmdb updated: swapped in")" "the mmdb swapped in once, without a reload of its own"
assert_eq refused "$(origin)" "127.0.0.1 is AA now: rejected"
assert_eq REJECT "$(decided a.test)" "a.test (GEOSITE,test) is rejected"
assert_eq DIRECT "$(decided b.test)" "b.test is not in site test"
cmp -s "$E2E_TMP/v1.mmdb" "$(ls "$CACHE"/geo-mmdb-* | grep -v '\.meta$')" || fail "the mmdb's cache is not the served file"

check "the interval: 304s"
assert_log "geo file geo.mmdb: not modified \(304\)" "a 304 for the mmdb" 10
assert_log "geo file geo.geosite: not modified \(304\)" "a 304 for the geosite" 10

check "new files are fetched and swapped in; the decision cache is dropped"
sleep 1.1 # a new Last-Modified second
n=$(log_count "geo.mmdb updated: swapped in")
m=$(log_count "reloaded")
serve "$E2E_TMP/v2.mmdb" Country.mmdb
serve "$E2E_TMP/v2.dat" GeoSite.dat
wait_more "geo.mmdb updated: swapped in" "$n"
wait_more "reloaded" "$m"
assert_eq "$HELLO" "$(origin)" "127.0.0.1 is BB now: served"
assert_eq DIRECT "$(decided a.test)" "a.test is not in site test any more"
assert_eq REJECT "$(decided b.test)" "b.test is"

keeps() {
    assert_log "geo file geo.$1: fetching .* failed: $2.*keeping the file it has; retry in 2 s" "$3" 10
    assert_eq "$HELLO" "$(origin)" "127.0.0.1 is still BB: the old mmdb is kept"
    assert_eq REJECT "$(decided b.test)" "b.test is still rejected: the old geosite is kept"
}
check "files that are not an mmdb / a geosite.dat keep the old ones"
printf 'not an mmdb\n' >"$WWW/Country.mmdb"
printf '\xff\xff\xff\xff' >"$WWW/GeoSite.dat"
keeps mmdb "not a usable mmdb" "the broken mmdb is refused"
keeps geosite "not a geosite.dat" "the broken geosite is refused"
check "an mmdb over max_size (65536 bytes) is refused, the old one kept"
head -c 70000 /dev/zero >"$WWW/Country.mmdb"
keeps mmdb "70000 bytes, over the limit of 65536 \(max_size\): refused" "the oversized mmdb is refused"
cmp -s "$E2E_TMP/v2.mmdb" "$(ls "$CACHE"/geo-mmdb-* | grep -v '\.meta$')" || fail "the cache does not hold the good mmdb"
chute_alive

check "a restart from the caches with the server down"
kill -TERM "$CHUTE_PID"; wait "$CHUTE_PID" || true; CHUTE_PID=
kill_wait "$NGINX_PID" || true
NGINX_PID=
chute_start
assert_no_log "no cache yet" "both files come from their caches"
assert_eq DIRECT "$(decided 127.0.0.1)" "127.0.0.1 is BB from the mmdb's cache"
assert_eq REJECT "$(decided b.test)" "b.test is rejected from the geosite's cache"
assert_eq DIRECT "$(decided a.test)" "a.test is not"
assert_log "geo file geo.mmdb: fetching .* failed: connecting to 127.0.0.1:$ORIGIN_PORT" "the fetches fail, logged" 10
assert_eq REJECT "$(decided b.test)" "and the files stay"
e2e_pass
