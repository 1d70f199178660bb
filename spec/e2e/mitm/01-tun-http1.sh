#!/usr/bin/env bash
# HTTPS through the TUN, intercepted (root): curl trusting only chute's CA
# reaches nginx over TLS, its requests rewritten by Lua hooks that C picked
# by URL; hosts not on the MITM list keep the origin's own certificate; an
# origin chute cannot verify gets a 502 naming why; uploads and a 1 GiB
# download stream through with RSS flat.
. "$(dirname "$0")/mitmlib.bash"
need_root
mitm_env_up '  mitm = { hosts = { "test.example", "test.example:8443" } },' <<'LUA'
local calls = 0
chute.on_request([[^https://test\.example/echo]], function(req)
  calls = calls + 1
  req.headers["x-chute"] = "hooked"
end)
chute.on_request([[^https://test\.example/local$]], function(req)
  return chute.respond(200, { ["content-type"] = "text/plain" }, "local answer\n")
end)
chute.on_request([[^https://test\.example/go$]], function(req)
  return chute.redirect("https://test.example/small", 302)
end)
chute.on_request([[^https://test\.example/deny$]], function(req)
  return chute.reject()
end)
chute.on_request([[^https://test\.example/rewrite$]], function(req)
  req.path = "/echo"
  req.query = "from=hook"
end)
chute.on_response([[^https://test\.example/(small|big\.bin)$]], function(resp, req)
  resp.headers["x-resp"] = "seen"
end)
function chute.route(flow)
  return "DIRECT"
end
LUA

say "the leaf is chute's, minted for the host"
out=$(mcurl -v -o "$NETNS_TMP/small.got" https://test.example/small 2>&1) || fail "GET /small: $out"
assert_eq "$SHA_SMALL" "$(sha_file "$NETNS_TMP/small.got")" "the body is the origin's"
assert_match "issuer: .*chute CA" "$out" "the certificate curl saw is chute's"
assert_match "x-resp: seen" "$out" "the response hook added a header"

say "request hooks"
assert_match "x_chute=hooked" "$(mcurl https://test.example/echo)" "on_request set x-chute"
assert_match "uri=/echo\\?from=hook" "$(mcurl https://test.example/rewrite)" "path and query rewritten"
assert_eq "local answer" "$(mcurl https://test.example/local)" "chute.respond answers locally"
grep -q ' /local ' "$NETNS_TMP/tls-access.log" && fail "the origin saw /local"
assert_eq "302 https://test.example/small" \
    "$(mcurl -o /dev/null -w '%{http_code} %{redirect_url}' https://test.example/go)" "redirect"
rc=0
mcurl -o /dev/null https://test.example/deny 2>/dev/null || rc=$?
assert_eq 52 "$rc" "reject closes without an answer (curl: empty reply)"

say "keep-alive: 100 requests on one connection"
urls=()
for i in $(seq 100); do urls+=("https://test.example/echo?i=$i"); done
conns=$(mcurl -o /dev/null -w '%{num_connects}\n' "${urls[@]}" | awk '{ s += $1 } END { print s }')
assert_eq 1 "$conns" "one TLS connection for 100 requests"
assert_ge 100 "$(grep -c 'GET /echo?i=' "$NETNS_TMP/tls-access.log")" "nginx saw the 100"

say "not on the list: the origin's own certificate, untouched"
ip netns exec "$NS_CLI" curl -sS --max-time 10 --cacert "$ORIGIN_CA" \
    --resolve "other.example:443:$SRV4" -o /dev/null https://other.example/small ||
    fail "other.example with the origin's CA"
rc=0
mcurl -o /dev/null https://other.example/small 2>/dev/null || rc=$?
assert_eq 60 "$rc" "other.example does not verify against chute's CA (passed through)"
fp() { openssl x509 -noout -fingerprint -sha256 | cut -d= -f2; }
seen=$(ip netns exec "$NS_CLI" timeout 10 openssl s_client -connect "$SRV4:443" \
    -servername other.example </dev/null 2>/dev/null | fp)
assert_eq "$(fp <"$NETNS_TMP/pki/leaf.pem")" "$seen" "the client sees the origin's own leaf (sha256 fingerprint)"

say "an origin chute cannot verify: 502 naming why"
body=$(mcurl -w '\n%{http_code}' https://test.example:8443/small)
assert_match "502$" "$body" "untrusted origin answered 502"
assert_match "not trusted" "$body" "the page says why ($body)"
wait_log "mitm: test\\.example:8443: tls: certificate not trusted" 5 || fail "no log line for the untrusted origin"

say "uploads and a large download through the hooks"
head -c $((64 << 20)) /dev/urandom >"$NETNS_TMP/up.bin"
mcurl -T "$NETNS_TMP/up.bin" -o /dev/null https://test.example/up/up.bin || fail "PUT 64 MiB"
assert_eq "$(sha_file "$NETNS_TMP/up.bin")" "$(sha_file "$NETNS_TMP/up/up.bin")" \
    "a 64 MiB upload arrives whole at the origin"
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$CHUTE_PID/status"; }
big_file 1024
mcurl -o /dev/null https://test.example/1m.bin
rss0=$(rss)
assert_eq "$SHA_BIG" "$(mcurl https://test.example/big.bin | sha256_stream)" \
    "1 GiB download through the MITM (a response hook on its headers), sha256-equal"
rss1=$(rss)
say "chute's RSS: $rss0 KiB before, $rss1 KiB after the 1 GiB"
check "RSS stays flat: the body streams, nothing of it is buffered whole"
[ $((rss1 - rss0)) -lt 16384 ] || fail "RSS grew by $((rss1 - rss0)) KiB over the download"

stats_read
say "stats: mitm_flows=$S_mitm_flows mitm_requests=$S_mitm_requests verify_failed=$S_mitm_upstream_verify_failed"
assert_ge 8 "$S_mitm_flows" "mitm_flows counts the intercepted flows"
assert_ge 109 "$S_mitm_requests" "mitm_requests: every request read"
assert_ge 1 "$S_mitm_upstream_verify_failed" "the untrusted origin is counted"
assert_ge 1 "$S_mitm_answered" "local answers counted"
chute_alive
pass
