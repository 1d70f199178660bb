#!/usr/bin/env bash
# HTTP/2 through the MITM at its edges (root), against nginx with a master
# process (so that it can reload): response trailers relayed to the client;
# a stream its client does not read (its window never reopened) stalls no
# other stream of the connection and loses nothing once read; a reloaded
# nginx says GOAWAY with a download in flight: the download completes
# sha256-equal, and the next request goes out on a new upstream connection.
. "$(dirname "$0")/mitmlib.bash"
need_root
need_cmd nghttp
H2=4453
mitm_env_up "  mitm = { hosts = { \"test.example:$H2\" } }," <<'LUA'
chute.on_request([[^https://test\.example:\d+/echo]], function(req)
  req.headers["x-chute"] = "hooked"
end)
function chute.route(flow)
  return "DIRECT"
end
LUA

big_file 64
head -c $((8 << 20)) /dev/urandom >"$WWW/8m.bin"
SHA_8M=$(sha_file "$WWW/8m.bin")
mkdir -p "$NETNS_TMP/nginx-edge"
cat >"$NETNS_TMP/nginx-edge.conf" <<NGX
daemon off;
master_process on;
user root; # the files are in a private temp dir
worker_processes 1;
pid $NETNS_TMP/nginx-edge.pid;
error_log $NETNS_TMP/nginx-edge-error.log warn;
events { worker_connections 256; }
http {
    default_type application/octet-stream;
    log_format edge '\$request_method \$request_uri \$status \$body_bytes_sent conn=\$connection';
    access_log $NETNS_TMP/edge-access.log edge;
    client_body_temp_path $NETNS_TMP/nginx-edge/body;
    proxy_temp_path $NETNS_TMP/nginx-edge/proxy;
    fastcgi_temp_path $NETNS_TMP/nginx-edge/fastcgi;
    uwsgi_temp_path $NETNS_TMP/nginx-edge/uwsgi;
    scgi_temp_path $NETNS_TMP/nginx-edge/scgi;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate $NETNS_TMP/pki/leaf.pem;
    ssl_certificate_key $NETNS_TMP/pki/leaf.key;
    server {
        listen $SRV4:$H2 ssl http2;
        root $WWW;
        location = /echo {
            default_type text/plain;
            return 200 "uri=\$request_uri x_chute=\$http_x_chute proto=\$server_protocol\n";
        }
        location = /small { add_trailer x-checksum "chute-trailer-1"; }
        location /slow/ { alias $WWW/; limit_rate 2m; }
    }
}
NGX
bg_in "$NS_SRV" "$NETNS_TMP/nginx-edge-error.log" nginx -p "$NETNS_TMP/nginx-edge" \
    -c "$NETNS_TMP/nginx-edge.conf" -e "$NETNS_TMP/nginx-edge-error.log"
NGINX_MASTER=$BG_PID
wait_tcp "$NS_SRV" "$SRV4" "$H2" 10 || fail "nginx did not start: $(tail -5 "$NETNS_TMP/nginx-edge-error.log")"
e2curl() {
    ip netns exec "$NS_CLI" curl --silent --show-error --max-time 60 --cacert "$CHUTE_CA" \
        --resolve "test.example:$H2:$SRV4" "$@"
}

say "trailers: the origin's come through to the client"
# nghttp has no --resolve: a hosts file for the client namespace only
# (ip netns exec binds /etc/netns/NS/hosts over /etc/hosts).
mkdir -p "/etc/netns/$NS_CLI"
echo "$SRV4 test.example" >"/etc/netns/$NS_CLI/hosts"
out=$(ip netns exec "$NS_CLI" timeout 20 nghttp -v "https://test.example:$H2/small" 2>&1) || true
rm -rf "/etc/netns/$NS_CLI"
assert_match "hello from the tun e2e server" "$out" "the body"
assert_match "recv \\(stream_id=[0-9]+\\) x-checksum: chute-trailer-1" "$out" "the trailer reached the client"
assert_match "recv HEADERS frame <[^>]*flags=0x05" "$out" "in a HEADERS frame that ends the stream"

say "a stalled stream stalls no other, and loses nothing"
out=$(ip netns exec "$NS_CLI" timeout 60 "$PY" "$(dirname "$0")/h2_rst.py" test.example "$SRV4" "$H2" \
    "$CHUTE_CA" /big.bin slow 2>&1) || fail "h2_rst.py slow: $out"
assert_match "stream 1 stalled after [0-9]+ bytes" "$out" "stream 1 stalls on its window"
stalled=$(sed -n 's/^stream 1 stalled after \([0-9]*\) bytes/\1/p' <<<"$out")
[ "$stalled" -le 65535 ] || fail "chute sent $stalled bytes past the client's 64 KiB stream window"
assert_match "stream 3: headers seen body uri=/echo\\?after=stall x_chute=hooked" "$out" \
    "stream 3 is answered while stream 1 waits"
assert_match "stream 1: $BIG_SIZE bytes in all" "$out" "then stream 1 arrives whole"

say "GOAWAY: nginx reloads with a download in flight"
stats_read
opened0=$S_mitm_h2_upstream_opened
e2curl --http2 -o "$NETNS_TMP/8m.got" "https://test.example:$H2/slow/8m.bin" &
dl=$!
for _ in $(seq 50); do
    [ -s "$NETNS_TMP/8m.got" ] && break
    sleep 0.1
done
[ -s "$NETNS_TMP/8m.got" ] || fail "the slow download did not start"
kill -HUP "$NGINX_MASTER"
wait_log "said GOAWAY" 10 || fail "chute did not log the origin's GOAWAY"
assert_match "uri=/echo\\?after=goaway x_chute=hooked proto=HTTP/2.0" \
    "$(e2curl --http2 "https://test.example:$H2/echo?after=goaway")" "a request after the GOAWAY"
wait "$dl" || fail "the download in flight failed across the GOAWAY"
assert_eq "$SHA_8M" "$(sha_file "$NETNS_TMP/8m.got")" "the download in flight, whole"
stats_read
assert_ge 1 "$S_mitm_h2_goaway" "mitm_h2_goaway"
assert_ge $((opened0 + 1)) "$S_mitm_h2_upstream_opened" "a new upstream connection after the GOAWAY"
c_old=$(grep -F 'GET /slow/8m.bin ' "$NETNS_TMP/edge-access.log" | sed 's/.*conn=//')
c_new=$(grep -F 'GET /echo?after=goaway ' "$NETNS_TMP/edge-access.log" | sed 's/.*conn=//')
[ -n "$c_old" ] && [ "$c_old" != "$c_new" ] ||
    fail "the request after the GOAWAY shared the draining connection ($c_old, $c_new)"
chute_alive
pass
