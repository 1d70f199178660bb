#!/usr/bin/env bash
# HTTP/2 through the MITM (root): nginx speaking h2 is the origin (:4443;
# :4444 speaks only http/1.1). curl --http2 and nghttp through the TUN
# trusting only chute's CA get h2 from chute, their requests hooked;
# h2load drives 100 concurrent streams on one client connection through the
# reverse listener; several client connections share one upstream h2
# connection; a client RST_STREAM cancels the upstream stream; a 64 MiB
# body arrives whole; body hooks run on h2 streams (and bodies over their
# max stream past them); an h1-only origin is spoken to in HTTP/1.1 behind
# an h2 client (streams, a download, an upload of unknown length).
. "$(dirname "$0")/mitmlib.bash"
need_root
need_cmd nghttp
need_cmd h2load
H2=4443
H1=4444
REV=9443
mitm_env_up "  listen = { reverse = { \"127.0.0.1:$REV -> https://test.example:$H2\" } },
  dns = { upstream = { \"$SRV4\" }, persist = false },
  mitm = { hosts = { \"test.example:$H2\", \"test.example:$H1\" } }," <<'LUA'
chute.on_request([[^https://test\.example(:\d+)?/echo]], function(req)
  req.headers["x-chute"] = "hooked"
end)
chute.on_request([[^https://test\.example(:\d+)?/local$]], function(req)
  return chute.respond(201, { ["content-type"] = "text/plain" }, "local answer\n")
end)
chute.on_response([[^https://test\.example(:\d+)?/small$]], function(resp, req)
  resp.headers["X-Resp"] = "seen"
end)
chute.on_request([[^https://test\.example(:\d+)?/up/body\.txt$]], function(req)
  req.body = req.body:upper() .. "+chute"
end, { body = true })
chute.on_request([[^https://test\.example(:\d+)?/up/over\.bin$]], function(req)
  req.headers["x-over"] = tostring(req.body == nil)
end, { body = true, max_body = 65536 })
chute.on_response([[^https://test\.example(:\d+)?/small\?b$]], function(resp, req)
  resp.body = resp.body:gsub("hello", "HOLA")
end, { body = true })
chute.on_response([[^https://test\.example(:\d+)?/big\.bin\?b$]], function(resp, req)
  resp.headers["x-over"] = tostring(resp.body == nil)
end, { body = true, max_body = 65536 })
function chute.route(flow)
  return "DIRECT"
end
LUA

big_file 64
cat >"$NETNS_TMP/nginx-h2.conf" <<NGX
daemon off;
master_process off;
worker_processes 1;
pid $NETNS_TMP/nginx-h2.pid;
error_log $NETNS_TMP/nginx-h2-error.log warn;
events { worker_connections 1024; }
http {
    default_type application/octet-stream;
    log_format h2 '\$request_method \$request_uri \$status \$body_bytes_sent conn=\$connection x_chute=\$http_x_chute proto=\$server_protocol';
    access_log $NETNS_TMP/h2-access.log h2;
    client_body_temp_path $NETNS_TMP/nginx-tls/body;
    proxy_temp_path $NETNS_TMP/nginx-tls/proxy;
    fastcgi_temp_path $NETNS_TMP/nginx-tls/fastcgi;
    uwsgi_temp_path $NETNS_TMP/nginx-tls/uwsgi;
    scgi_temp_path $NETNS_TMP/nginx-tls/scgi;
    keepalive_requests 100000;
    client_max_body_size 2g;
    http2_max_requests 100000;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate $NETNS_TMP/pki/leaf.pem;
    ssl_certificate_key $NETNS_TMP/pki/leaf.key;
    server {
        listen $SRV4:$H2 ssl http2;
        root $WWW;
        location = /echo {
            default_type text/plain;
            return 200 "method=\$request_method uri=\$request_uri x_chute=\$http_x_chute proto=\$server_protocol\n";
        }
        location /slow/ { alias $WWW/; limit_rate 200k; }
        location /up/ {
            root $NETNS_TMP;
            dav_methods PUT;
            create_full_put_path on;
        }
    }
    server {
        listen $SRV4:$H1 ssl;
        root $WWW;
        location /up/ {
            root $NETNS_TMP;
            dav_methods PUT;
            create_full_put_path on;
        }
        location = /echo {
            default_type text/plain;
            return 200 "method=\$request_method uri=\$request_uri x_chute=\$http_x_chute proto=\$server_protocol\n";
        }
    }
}
NGX
bg_in "$NS_SRV" "$NETNS_TMP/nginx-h2-error.log" nginx -p "$NETNS_TMP/nginx-tls" \
    -c "$NETNS_TMP/nginx-h2.conf" -e "$NETNS_TMP/nginx-h2-error.log"
wait_tcp "$NS_SRV" "$SRV4" "$H2" 10 || fail "nginx (h2) did not start: $(tail -5 "$NETNS_TMP/nginx-h2-error.log")"

h2curl() {
    ip netns exec "$NS_CLI" curl --silent --show-error --max-time 60 --cacert "$CHUTE_CA" \
        --resolve "test.example:$H2:$SRV4" --resolve "test.example:$H1:$SRV4" "$@"
}

say "a cold start: 100 new clients at once cost one upstream handshake (mitm/probe.c)"
out=$(ip netns exec "$NS_CLI" h2load -n 100 -c 100 -m 1 "https://127.0.0.1:$REV/small" \
    -H ":authority: test.example:$H2" 2>&1) || fail "h2load (cold start): $out"
assert_match "100 succeeded, 0 failed, 0 errored" "$out" "100 clients, all answered"
stats_read
check "at most 2 upstream h2 connections for 100 new clients"
[ "${S_mitm_h2_upstream_opened:-99}" -le 2 ] ||
    fail "100 new clients opened $S_mitm_h2_upstream_opened upstream h2 connections"
check "at most 2 upstream TLS handshakes"
[ "${S_tls_handshakes:-99}" -le 2 ] || fail "100 new clients cost $S_tls_handshakes upstream handshakes"

say "curl --http2 through the TUN: h2 to chute, h2 to the origin, the hook applied"
out=$(h2curl --http2 -v "https://test.example:$H2/echo" 2>&1) || fail "GET /echo: $out"
assert_match "ALPN: server accepted h2|ALPN, server accepted to use h2" "$out" "chute offered h2"
assert_match "issuer: .*chute CA" "$out" "the leaf is chute's"
assert_match "x_chute=hooked proto=HTTP/2.0" "$out" "on_request ran; the origin saw HTTP/2"
out=$(h2curl --http2 -sS -D - -o "$NETNS_TMP/small.got" "https://test.example:$H2/small")
assert_eq "$SHA_SMALL" "$(sha_file "$NETNS_TMP/small.got")" "the body is the origin's"
assert_match "^x-resp: seen" "$out" "on_response added a header (lower case on h2)"
assert_eq "201 local answer" "$(h2curl --http2 -w '%{http_code} ' -o "$NETNS_TMP/local" \
    "https://test.example:$H2/local"; cat "$NETNS_TMP/local")" "chute.respond answers the stream"
grep -q ' /local ' "$NETNS_TMP/h2-access.log" && fail "the origin saw /local"
assert_eq "200 0" "$(h2curl --http2 -I -o /dev/null -w '%{http_code} %{size_download}' \
    "https://test.example:$H2/1m.bin")" "HEAD"

say "an upload over h2 (the request body's window opens as the origin reads)"
h2curl --http2 -T "$WWW/big.bin" -o /dev/null "https://test.example:$H2/up/big.bin" || fail "PUT over h2"
assert_eq "$SHA_BIG" "$(sha_file "$NETNS_TMP/up/big.bin")" "64 MiB uploaded whole"

say "body hooks on h2: a response body rewritten (its length too), a request body rewritten"
out=$(h2curl --http2 -i "https://test.example:$H2/small?b")
assert_match "HOLA from the tun e2e server" "$out" "the response body hook ran on h2"
assert_match "content-length: 29" "$out" "the new body's length (the origin's was 30)"
printf 'lower case body' >"$NETNS_TMP/body.txt"
h2curl --http2 -T "$NETNS_TMP/body.txt" -o /dev/null "https://test.example:$H2/up/body.txt" ||
    fail "PUT through a request body hook"
assert_eq "LOWER CASE BODY+chute" "$(cat "$NETNS_TMP/up/body.txt")" "the origin got the hook's body"
say "bodies over max_body stream as they came, past the hooks that wanted them"
out=$(h2curl --http2 -D - -o "$NETNS_TMP/over.got" "https://test.example:$H2/big.bin?b")
case $out in *x-over*) fail "a body hook ran on a body over its max" ;; esac
wait_log "big\\.bin\\?b: response body over max_body: streamed" 5 ||
    fail "the streamed response body is not logged"
assert_eq "$SHA_BIG" "$(sha_file "$NETNS_TMP/over.got")" "64 MiB over the max, whole"
h2curl --http2 -T "$WWW/big.bin" -o /dev/null "https://test.example:$H2/up/over.bin" ||
    fail "a 64 MiB PUT over the request hook's max"
assert_eq "$SHA_BIG" "$(sha_file "$NETNS_TMP/up/over.bin")" "64 MiB uploaded whole past the max"
wait_log "over\\.bin: request body over max_body" 5 || fail "the streamed request body is not logged"
stats_read
assert_ge 2 "$S_hook_body_skips" "hook_body_skips counts both"

say "nghttp -nv through the TUN"
# nghttp has no --resolve: a hosts file for the client namespace only
# (ip netns exec binds /etc/netns/NS/hosts over /etc/hosts).
mkdir -p "/etc/netns/$NS_CLI"
echo "$SRV4 test.example" >"/etc/netns/$NS_CLI/hosts"
out=$(ip netns exec "$NS_CLI" timeout 20 nghttp -nv "https://test.example:$H2/echo?via=nghttp" 2>&1) || true
rm -rf "/etc/netns/$NS_CLI"
assert_match "recv SETTINGS frame" "$out" "nghttp speaks h2 with chute"
assert_match "recv \\(stream_id=[0-9]+\\) :status: 200" "$out" "nghttp got its answer"
assert_match "GET /echo\\?via=nghttp 200 .* x_chute=hooked proto=HTTP/2.0" \
    "$(cat "$NETNS_TMP/h2-access.log")" "hooked, h2 upstream"

say "a 64 MiB download, sha256-equal"
h2curl --http2 -o "$NETNS_TMP/big.got" "https://test.example:$H2/big.bin" || fail "big download"
assert_eq "$SHA_BIG" "$(sha_file "$NETNS_TMP/big.got")" "64 MiB over h2 on both legs"

say "several client connections share one upstream h2 connection"
stats_read
opened0=${S_mitm_h2_upstream_opened:-0}
pids=()
for i in $(seq 8); do
    h2curl --http2 -o /dev/null "https://test.example:$H2/echo?c=$i" &
    pids+=($!)
done
wait "${pids[@]}" # not a bare wait: nginx and chute are children too
stats_read
assert_eq "$opened0" "${S_mitm_h2_upstream_opened:-x}" "no new upstream connection for 8 client connections"
conns=$(grep 'GET /echo?c=' "$NETNS_TMP/h2-access.log" | sed 's/.*conn=\([0-9]*\).*/\1/' | sort -u | wc -l)
assert_eq 1 "$conns" "nginx served the 8 requests on one connection"
assert_ge 8 "${S_mitm_h2_upstream_reused:-0}" "streams reused the shared connection"

say "100 concurrent streams on one client connection (h2load through the reverse listener)"
out=$(ip netns exec "$NS_CLI" h2load -n 2000 -c 1 -m 100 "https://127.0.0.1:$REV/small" \
    -H ":authority: test.example:$H2" 2>&1) || fail "h2load: $out"
assert_match "2000 succeeded, 0 failed, 0 errored" "$out" "2000 requests, 100 at a time"
assert_match "status codes: 2000 2xx" "$out" "all 200"
via=$(grep -E '^finished in' <<<"$out")
direct=$(ip netns exec "$NS_SRV" h2load -n 2000 -c 1 -m 100 "https://$SRV4:$H2/small" 2>&1 | grep -E '^finished in')
say "h2load -c 1 -m 100, 2000 x /small: through chute: $via; direct to nginx: $direct"

say "100 client connections, one stream each, on the shared upstream connection"
stats_read
opened0=${S_mitm_h2_upstream_opened:-0}
out=$(ip netns exec "$NS_CLI" h2load -n 2000 -c 100 -m 1 "https://127.0.0.1:$REV/small" \
    -H ":authority: test.example:$H2" 2>&1) || fail "h2load -c 100: $out"
assert_match "2000 succeeded, 0 failed, 0 errored" "$out" "2000 requests on 100 connections"
stats_read
assert_ge "$S_mitm_h2_upstream_opened" "$((opened0 + 10))" "<= 10 upstream connections for 100 clients"
say "upstream h2 connections opened for 100 clients: $((S_mitm_h2_upstream_opened - opened0))"
via=$(grep -E '^finished in' <<<"$out")
direct=$(ip netns exec "$NS_SRV" h2load -n 2000 -c 100 -m 1 "https://$SRV4:$H2/small" 2>&1 | grep -E '^finished in')
say "h2load -c 100 -m 1: through chute: $via; direct to nginx: $direct"
via=$(ip netns exec "$NS_CLI" h2load -n 4000 -c 10 -m 10 "https://127.0.0.1:$REV/small" \
    -H ":authority: test.example:$H2" 2>&1 | grep -E '^finished in')
direct=$(ip netns exec "$NS_SRV" h2load -n 4000 -c 10 -m 10 "https://$SRV4:$H2/small" 2>&1 | grep -E '^finished in')
say "h2load -c 10 -m 10: through chute: $via; direct to nginx: $direct"

say "a client RST_STREAM cancels the upstream stream"
rst0=${S_mitm_h2_client_rst:-0}
out=$(ip netns exec "$NS_CLI" timeout 30 python3 "$(dirname "$0")/h2_rst.py" test.example "$SRV4" "$H2" \
    "$CHUTE_CA" /slow/big.bin 2>&1) || fail "h2_rst.py: $out"
assert_match "stream 3: headers seen body method=GET uri=/echo\\?after=rst x_chute=hooked" "$out" \
    "the connection goes on after the reset"
for i in $(seq 50); do
    grep -q 'GET /slow/big.bin ' "$NETNS_TMP/h2-access.log" && break
    sleep 0.2
done
line=$(grep 'GET /slow/big.bin ' "$NETNS_TMP/h2-access.log")
assert_match "GET /slow/big.bin (499|200) [0-9]+ .*proto=HTTP/2.0" "$line" "nginx ended the upstream stream early"
got=$(awk '{ print $4 }' <<<"$line")
[ "$got" -lt "$BIG_SIZE" ] || fail "nginx sent the whole body ($got): the cancel did not reach it"
stats_read
assert_ge $((rst0 + 1)) "${S_mitm_h2_client_rst:-0}" "chute counted the client's reset"

say "an h1-only origin behind an h2 client: translated (h2 to chute, HTTP/1.1 to the origin)"
out=$(h2curl --http2 -v "https://test.example:$H1/echo" 2>&1) || fail "h1 origin: $out"
assert_match "x_chute=hooked proto=HTTP/1.1" "$out" "the origin saw HTTP/1.1, hooked"
assert_match "ALPN: server accepted h2|ALPN, server accepted to use h2" "$out" "the client got h2"
urls=()
for i in $(seq 20); do urls+=("https://test.example:$H1/echo?par=$i"); done
out=$(h2curl --http2 -Z --parallel-max 20 "${urls[@]}") || fail "20 parallel streams: $out"
assert_eq 20 "$(grep -c 'x_chute=hooked proto=HTTP/1.1' <<<"$out")" "20 streams on one connection, each answered"
h2curl --http2 -o "$NETNS_TMP/h1big.got" "https://test.example:$H1/big.bin" || fail "64 MiB from the h1 origin"
assert_eq "$SHA_BIG" "$(sha_file "$NETNS_TMP/h1big.got")" "64 MiB over h2, from HTTP/1.1, whole"
head -c 3000000 /dev/urandom >"$NETNS_TMP/h1up.bin"
h2curl --http2 -T - -o /dev/null "https://test.example:$H1/up/h1up.bin" <"$NETNS_TMP/h1up.bin" ||
    fail "an upload of unknown length to the h1 origin"
assert_eq "$(sha_file "$NETNS_TMP/h1up.bin")" "$(sha_file "$NETNS_TMP/up/h1up.bin")" \
    "3 MB sent chunked to the HTTP/1.1 origin, whole"
stats_read
assert_ge 20 "$S_mitm_h1_upstream_parked" "the origin's connections went back to the pool"

say "an h1 client to the h2 origin"
assert_match "x_chute=hooked proto=HTTP/1.1" "$(h2curl --http1.1 "https://test.example:$H2/echo")" \
    "HTTP/1.1 on both legs"

stats_read
say "stats: h2 clients=$S_mitm_h2_client_conns streams=$S_mitm_h2_streams up_opened=$S_mitm_h2_upstream_opened reused=$S_mitm_h2_upstream_reused stalls=$S_mitm_h2_flow_stalls"
pass
