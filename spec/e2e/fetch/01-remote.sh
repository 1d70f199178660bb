#!/usr/bin/env bash
# Remote rule sets and a proxy provider served by a local nginx (plain
# HTTP and HTTPS), one rule set fetched through a Shadowsocks policy
# (ss-server): the first fetch from nothing, the interval and its 304s, a
# changed list swapped in for new flows, a failed fetch, a list that does
# not parse and one over max_size each keeping the old list, a restart
# from the caches with the server down, and `chute update`'s exit codes.
. "$(dirname "$0")/../lib.sh"

e2e_init
need_cmd nginx ss-server openssl
read -r SS_PORT <<<"$(e2e_ports 1)"
export CHUTE_STATE_DIR=$E2E_TMP/state
CACHE=$CHUTE_STATE_DIR/cache

# ---- the origin: nginx, its access log naming the client and the validator
mkdir -p "$E2E_TMP/nginx" "$E2E_TMP/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" \
    -keyout "$E2E_TMP/tls/srv.key" -out "$E2E_TMP/tls/srv.crt" >"$E2E_TMP/tls/log" 2>&1 ||
    fail "openssl: $(tail -n 3 "$E2E_TMP/tls/log")"
cat >"$E2E_TMP/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $E2E_TMP/nginx.pid;
error_log $E2E_TMP/nginx-error.log warn;
events { worker_connections 256; }
http {
    default_type text/plain;
    log_format e2e '\$remote_addr \$request_method \$uri \$status inm=\$http_if_none_match';
    access_log $E2E_TMP/access.log e2e;
    client_body_temp_path $E2E_TMP/nginx/body;
    proxy_temp_path $E2E_TMP/nginx/proxy;
    fastcgi_temp_path $E2E_TMP/nginx/fastcgi;
    uwsgi_temp_path $E2E_TMP/nginx/uwsgi;
    scgi_temp_path $E2E_TMP/nginx/scgi;
    server {
        listen 127.0.0.1:$ORIGIN_PORT;
        listen 127.0.0.1:$ALT_PORT ssl;
        ssl_certificate $E2E_TMP/tls/srv.crt;
        ssl_certificate_key $E2E_TMP/tls/srv.key;
        root $WWW;
    }
}
EOF
nginx_up() {
    nginx -p "$E2E_TMP/nginx" -c "$E2E_TMP/nginx.conf" -e "$E2E_TMP/nginx-error.log" &
    NGINX_PID=$!
    wait_port 127.0.0.1 "$ORIGIN_PORT" 10 || fail "nginx did not start: $(tail -n 3 "$E2E_TMP/nginx-error.log")"
}
nginx_up
printf 'hello\n' >"$WWW/small"
printf 'DOMAIN,a.test\n' >"$WWW/list.txt"
printf 'DOMAIN,v.test\n' >"$WWW/viass.txt"
printf 'DOMAIN-SUFFIX,s.test\n' >"$WWW/tls.txt"
cat >"$WWW/sub.yaml" <<EOF
proxies:
  - { name: hk, type: ss, server: 127.0.0.1, port: $SS_PORT, cipher: aes-128-gcm, password: pw }
  - { name: hk, type: ss, server: 127.0.0.1, port: $SS_PORT, cipher: aes-128-gcm, password: pw }
  - { name: nope, type: vmess, server: 127.0.0.1, port: 1 }
  - { name: ad-node, type: socks5, server: 127.0.0.1, port: 1 }
EOF

# ss-server makes its connections from 127.0.0.9: nginx's log tells them apart.
ss-server -s 127.0.0.1 -p "$SS_PORT" -k pw -m aes-128-gcm -b 127.0.0.9 >"$E2E_TMP/ss.log" 2>&1 &
E2E_EXTRA_PIDS+=($!)
wait_port 127.0.0.1 "$SS_PORT" 10 || fail "ss-server did not start: $(tail -n 3 "$E2E_TMP/ss.log")"

export SSL_CERT_FILE=$E2E_TMP/tls/srv.crt
U=http://127.0.0.1:$ORIGIN_PORT
bundle_write <<LUA
chute.proxy "ss" { type = "shadowsocks", server = "127.0.0.1", port = $SS_PORT,
                   cipher = "aes-128-gcm", password = "pw" }
chute.provider "sub" { url = "$U/sub.yaml", interval = 2, filter = "^hk" }
local list = chute.ruleset { url = "$U/list.txt", interval = 2, path = "list.txt",
                             max_size = 4096, format = "surge" }
local viass = chute.ruleset { url = "$U/viass.txt", interval = 3600, via = "ss" }
local tls = chute.ruleset { url = "https://127.0.0.1:$ALT_PORT/tls.txt", path = "tls.txt" }
chute.group "g" { type = "select", use = { "sub" } }
function chute.route(flow)
  if list:match(flow) or viass:match(flow) or tls:match(flow) then return "REJECT" end
  if flow.dst_port == $ORIGIN_PORT then return "g" end
  return "DIRECT"
end
LUA

check "a first start with no caches: each remote says it has none, and the start needs no network"
chute_start
assert_log "ruleset list.txt: no cache yet" "the list has no cache yet"
assert_log "provider sub: no cache yet .*no proxies until the first fetch" "the provider has none"
assert_log "chute.group \"g\": its providers have no proxies yet: it rejects" "the empty group rejects"

check "the first fetches, then a reload that loads them"
assert_log "ruleset list.txt: fetched 14 bytes, 1 rules" "list.txt fetched" 10
assert_log "provider sub: fetched [0-9]+ bytes, 3 proxies \(clash\), 1 entries chute cannot use" "sub fetched" 10
assert_log "ruleset tls.txt: fetched 21 bytes, 1 rules" "tls.txt fetched over HTTPS" 10
assert_log "ruleset http://127.0.0.1:$ORIGIN_PORT/viass.txt: fetched" "viass.txt fetched" 10
assert_log "reloaded .*rule version" "the bundle reloaded" 10
sleep 1
assert_eq REJECT "$(decided a.test)" "a.test (list.txt) is rejected"
assert_eq REJECT "$(decided v.test)" "v.test (viass.txt, fetched through ss) is rejected"
assert_eq REJECT "$(decided x.s.test)" "x.s.test (tls.txt, over HTTPS) is rejected"
assert_eq DIRECT "$(decided b.test)" "b.test is not in the lists"
check "viass.txt came through ss-server (from 127.0.0.9), the others directly"
grep -q -E "^127\.0\.0\.9 GET /viass.txt 200" "$E2E_TMP/access.log" || fail "no GET /viass.txt from ss-server: $(cat "$E2E_TMP/access.log")"
grep -q -E "^127\.0\.0\.1 GET /list.txt 200" "$E2E_TMP/access.log" || fail "no direct GET /list.txt"
check "the provider's proxies joined the group: hk, hk 2 (renamed), filtered ad-node out"
assert_log "provider sub: 'hk' is taken: this one is 'hk 2'" "the duplicate is renamed"
assert_log "provider sub: 2 proxies from its cache \(clash\), 1 left out by its filter" "the filter"
assert_eq hello "$(curl --silent --max-time 5 -x "socks5h://127.0.0.1:$SOCKS_PORT" "$U/small")" "a GET through the group g (hk)"
grep -q -E "^127\.0\.0\.9 GET /small 200" "$E2E_TMP/access.log" || fail "the GET did not go through ss-server (hk)"

check "the interval: the next fetches send the validators and get 304s"
assert_log "ruleset list.txt: not modified \(304\)" "a 304 for list.txt" 10
grep -q -E "GET /list.txt 304 inm=[^-]" "$E2E_TMP/access.log" || fail "no conditional GET of list.txt in nginx's log"

check "a changed list is fetched and swapped in for new flows"
sleep 1.1 # a new Last-Modified second
printf 'DOMAIN,b.test\n' >"$WWW/list.txt.new" && mv "$WWW/list.txt.new" "$WWW/list.txt"
n=$(log_count "ruleset list.txt: fetched")
r=$(log_count "reloaded .*rule version")
wait_more "ruleset list.txt: fetched" "$n"
wait_more "reloaded .*rule version" "$r"
assert_eq REJECT "$(decided b.test)" "b.test is rejected now"
assert_eq DIRECT "$(decided a.test)" "a.test is not any more"

keeps() {
    assert_log "ruleset list.txt: fetching .* failed: $1.*keeping the list it has; retry in 2 s" "$2" 10
    assert_eq REJECT "$(decided b.test)" "b.test is still rejected: the old list is kept"
}
check "a failed fetch (404) keeps the old list"
mv "$WWW/list.txt" "$WWW/list.txt.away"
keeps "HTTP 404" "the 404 is logged"
check "a list that does not parse keeps the old list"
printf 'IP-CIDR,999.1.1.1/40\n' >"$WWW/list.txt"
keeps "the list does not parse" "the broken list is logged and refused"
check "a list over max_size (4096 bytes) is refused, the old one kept"
head -c 5000 /dev/zero | tr '\0' '#' >"$WWW/list.txt"
keeps "5000 bytes, over the limit of 4096 \(max_size\): refused" "the oversized list is refused"
assert_eq "DOMAIN,b.test" "$(cat "$CACHE/list.txt")" "the cache still holds the good list"
chute_alive

check "a restart from the caches with the server down"
kill_wait "$NGINX_PID" || true
NGINX_PID=
kill -TERM "$CHUTE_PID"; wait "$CHUTE_PID" || true; CHUTE_PID=
chute_start
assert_no_log "no cache yet" "every remote has its cache"
assert_log "provider sub: 2 proxies from its cache" "the provider's proxies come from its cache"
assert_eq REJECT "$(decided b.test)" "b.test is rejected from the cache"
assert_eq REJECT "$(decided v.test)" "v.test too"
assert_log "fetching .* failed: connecting to 127.0.0.1:$ORIGIN_PORT via DIRECT" "the fetches fail, logged" 10
assert_eq REJECT "$(decided b.test)" "and the lists stay"

check "chute update: exit 1 while the server is down, a line per item"
rc=0
out=$("$CHUTE" update "$BUNDLE" 2>/dev/null) || rc=$?
assert_eq 1 "$rc" "chute update's exit status with the server down"
assert_eq 4 "$(grep -c '^failed' <<<"$out")" "four failed lines"
nginx_up
mv "$WWW/list.txt.away" "$WWW/list.txt"
check "chute update: exit 0 with the server back"
rc=0
out=$("$CHUTE" update "$BUNDLE" 2>/dev/null) || rc=$?
assert_eq 0 "$rc" "chute update's exit status: $out"
assert_eq 4 "$(grep -c -E '^(fetched|not modified)' <<<"$out")" "four fetched or not-modified lines"
grep -q -E "^not modified	ruleset http://127.0.0.1:$ORIGIN_PORT/viass.txt" <<<"$out" || fail "viass.txt: not modified: $out"
e2e_pass
