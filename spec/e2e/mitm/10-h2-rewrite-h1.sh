#!/usr/bin/env bash
# HTTP/2 through the MITM, a URL rewrite to another origin (root): the
# flow's origin speaks h2 (mitmlib's nginx on :4473), and a Surge-style
# rewrite (header mode) sends some of its requests to h1.test.example,
# whose nginx (:443) speaks only HTTP/1.1, or to plain
# http://h1.test.example/. The h2 client's streams are translated
# (mitm/h2_h1.c) instead of answered 502: the first ones fall back from
# the new connection's ALPN (all the streams that waited on it, at once),
# later ones go straight to HTTP/1.1 (the origin is remembered) over the
# pooled connection.
. "$(dirname "$0")/mitmlib.bash"
need_root
H2=4473
mitm_env_up "  dns = { upstream = { \"$SRV4\" }, persist = false },
  mitm = { hosts = { \"test.example:$H2\" } }," <<LUA
chute.module { name = "rewrites", text = [[
[URL Rewrite]
^https://test\\.example:$H2/to-h1/(.*) https://h1.test.example/\$1 header
^https://test\\.example:$H2/to-plain/(.*) http://h1.test.example/\$1 header
]] }
function chute.route(flow)
  return "DIRECT"
end
LUA

h2curl() {
    ip netns exec "$NS_CLI" curl --http2 --silent --show-error --max-time 30 --cacert "$CHUTE_CA" \
        --resolve "test.example:$H2:$SRV4" "$@"
}
U=https://test.example:$H2

say "the flow's own origin: h2 on both legs"
assert_match "h2 origin uri=/echo proto=HTTP/2.0" "$(h2curl "$U/echo")" "the h2 origin answers"

say "streams waiting on a new connection that chose HTTP/1.1 are translated, all of them"
out=$(h2curl --parallel --parallel-max 4 --no-progress-meter -w '%{http_code} %{http_version}\n' \
    "$U/to-h1/echo?a" "$U/to-h1/echo?b" "$U/to-h1/echo?c" "$U/to-h1/echo?d") ||
    fail "the parallel rewritten requests: $out"
for q in a b c d; do
    assert_match "uri=/echo\\?$q x_chute= host=h1\\.test\\.example" "$out" "stream $q reached the HTTP/1.1 origin"
done
assert_eq 4 "$(grep -c '^200 2$' <<<"$out")" "4 answers, 200 over h2 to the client"
assert_log "h1\\.test\\.example:443 speaks HTTP/1\\.1 \\(ALPN http/1\\.1\\): its streams are translated" \
    "the fallback is logged"
say "$(grep -o -E 'translated \([0-9]+ waited\)' "$CHUTE_LOG" | head -1)"
n=$(grep -c -E 'GET /echo\?[abcd] 200 .*host=h1\.test\.example .*proto=HTTP/1\.1' "$NETNS_TMP/tls-access.log" || true)
assert_eq 4 "$n" "nginx saw the four in HTTP/1.1"

say "later rewritten requests go straight to HTTP/1.1, over the pooled connection"
stats_read
reused0=$S_mitm_h1_upstream_reused
opened0=$S_mitm_h2_upstream_opened
for i in 1 2 3; do
    assert_match "uri=/echo\\?again=$i x_chute= host=h1\\.test\\.example" \
        "$(h2curl "$U/to-h1/echo?again=$i")" "rewritten request $i"
done
stats_read
assert_ge $((reused0 + 3)) "$S_mitm_h1_upstream_reused" "mitm_h1_upstream_reused"
assert_eq "$opened0" "$S_mitm_h2_upstream_opened" "no new h2 connection tried for the h1 origin"

say "a rewrite to a plain http:// URL: HTTP/1.1 without TLS"
assert_match "hello from the tun e2e server" "$(h2curl "$U/to-plain/small")" "the plain origin's file"
assert_match "h2 origin uri=/echo\\?last proto=HTTP/2.0" "$(h2curl "$U/echo?last")" \
    "the flow's origin still over h2"
assert_no_log "no h2 response from the origin" "no 502 on the way"
chute_alive
pass
