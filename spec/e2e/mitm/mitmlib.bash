# The MITM's harness, on top of the TUN one (spec/e2e/netns.sh):
#
#   mitm_env_up [LUA_CONFIG] <<LUA   namespaces, nginx (HTTP as netns.sh
#                              starts it, plus HTTPS below), dnsmasq, and chute
#                              on the TUN with LUA_CONFIG inside chute.config
#                              and the code given
#   mcurl ARGS...              curl in the client namespace trusting only
#                              chute's CA, test.example/other.example -> the
#                              server (the TUN sees an address; chute reads
#                              the name from the SNI)
#
# The origins, in the server namespace, with certificates from a test CA
# that chute trusts through SSL_CERT_FILE (and the client does not):
#   https://test.example/ and https://other.example/ on :443, same files
#   as netns.sh's nginx; /echo answers what arrived (method, URI, x-chute
#   header, Host); PUT /up/NAME stores the body in $NETNS_TMP/up/NAME.
#   https://test.example:8443/ with a self-signed certificate: untrusted.
#   https://test.example:8444/ speaking only TLS 1.3 (which BearSSL cannot).
#   https://test.example:4473/ speaking h2 (and http/1.1): /echo says so.
# chute's own CA is made in $CHUTE_STATE_DIR on first use.

# shellcheck source=../netns.sh
. "$(dirname "${BASH_SOURCE[0]}")/../netns.sh"
TEST_NAME=mitm/$(basename "${BASH_SOURCE[1]:-$0}" .sh)

# A test CA and a leaf for the names the origins serve.
origin_certs() {
    need_cmd openssl
    local d=$NETNS_TMP/pki
    mkdir -p "$d"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
        -subj "/CN=chute e2e origin CA" -keyout "$d/ca.key" -out "$d/ca.pem" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
        2>/dev/null || fail "origin CA"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=test.example" \
        -keyout "$d/leaf.key" -out "$d/leaf.csr" 2>/dev/null || fail "origin CSR"
    printf 'subjectAltName=DNS:test.example,DNS:other.example,DNS:example.com,DNS:*.example.com,DNS:*.example.net,DNS:*.test.example,IP:%s\nextendedKeyUsage=serverAuth\n' \
        "$SRV4" >"$d/ext"
    openssl x509 -req -in "$d/leaf.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
        -days 30 -extfile "$d/ext" -out "$d/leaf.pem" 2>/dev/null || fail "origin leaf"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
        -subj "/CN=test.example" -addext subjectAltName=DNS:test.example \
        -keyout "$d/self.key" -out "$d/self.pem" 2>/dev/null || fail "self-signed leaf"
    ORIGIN_CA=$d/ca.pem
}

server_https() {
    need_cmd nginx
    origin_certs
    mkdir -p "$NETNS_TMP/nginx-tls"
    cat >"$NETNS_TMP/nginx-tls.conf" <<NGX
daemon off;
master_process off;
worker_processes 1;
pid $NETNS_TMP/nginx-tls.pid;
error_log $NETNS_TMP/nginx-tls-error.log warn;
events { worker_connections 1024; }
http {
    default_type application/octet-stream;
    log_format e2e '\$request_method \$request_uri \$status \$body_bytes_sent host=\$host x_chute=\$http_x_chute proto=\$server_protocol conn=\$connection';
    access_log $NETNS_TMP/tls-access.log e2e;
    client_body_temp_path $NETNS_TMP/nginx-tls/body;
    proxy_temp_path $NETNS_TMP/nginx-tls/proxy;
    fastcgi_temp_path $NETNS_TMP/nginx-tls/fastcgi;
    uwsgi_temp_path $NETNS_TMP/nginx-tls/uwsgi;
    scgi_temp_path $NETNS_TMP/nginx-tls/scgi;
    keepalive_requests 10000;
    client_max_body_size 2g;
    ssl_protocols TLSv1.2 TLSv1.3;
    server {
        listen $SRV4:443 ssl;
        server_name _;
        ssl_certificate $NETNS_TMP/pki/leaf.pem;
        ssl_certificate_key $NETNS_TMP/pki/leaf.key;
        root $WWW;
        location = /echo {
            default_type text/plain;
            return 200 "method=\$request_method uri=\$request_uri x_chute=\$http_x_chute host=\$host\n";
        }
        location /up/ {
            root $NETNS_TMP;
            dav_methods PUT;
            create_full_put_path on;
        }
    }
    server {
        listen $SRV4:8444 ssl;
        server_name _;
        ssl_protocols TLSv1.3;
        ssl_certificate $NETNS_TMP/pki/leaf.pem;
        ssl_certificate_key $NETNS_TMP/pki/leaf.key;
        root $WWW;
    }
    server {
        listen $SRV4:8443 ssl;
        server_name _;
        ssl_certificate $NETNS_TMP/pki/self.pem;
        ssl_certificate_key $NETNS_TMP/pki/self.key;
        root $WWW;
    }
    server {
        listen $SRV4:4473 ssl http2;
        server_name _;
        ssl_certificate $NETNS_TMP/pki/leaf.pem;
        ssl_certificate_key $NETNS_TMP/pki/leaf.key;
        root $WWW;
        location = /echo {
            default_type text/plain;
            return 200 "h2 origin uri=\$request_uri proto=\$server_protocol\n";
        }
    }
}
NGX
    bg_in "$NS_SRV" "$NETNS_TMP/nginx-tls-error.log" nginx -p "$NETNS_TMP/nginx-tls" \
        -c "$NETNS_TMP/nginx-tls.conf" -e "$NETNS_TMP/nginx-tls-error.log"
    wait_tcp "$NS_SRV" "$SRV4" 443 10 ||
        fail "nginx (TLS) did not start: $(tail -5 "$NETNS_TMP/nginx-tls-error.log")"
}

# mitm_bundle [LUA_CONFIG] < code: the TUN bundle with a MITM section.
mitm_bundle() {
    tun_bundle "${1:-}"
}

mitm_env_up() {
    netns_setup
    servers_start http dns https
    export CHUTE_STATE_DIR=$NETNS_TMP/state
    export SSL_CERT_FILE=$ORIGIN_CA
    CHUTE_CA=$CHUTE_STATE_DIR/ca.pem
    mitm_bundle "${1:-}"
    tun_chute_start
    wait_file "$CHUTE_CA" 5 || fail "chute made no CA at $CHUTE_CA"
}

# mcurl: curl through the TUN, HTTP/1.1 (the h2 suites use their own; chute
# offers h2 to clients whatever the origin speaks).
mcurl() {
    ip netns exec "$NS_CLI" curl --http1.1 --silent --show-error --max-time 20 --cacert "$CHUTE_CA" \
        --resolve "test.example:443:$SRV4" --resolve "other.example:443:$SRV4" \
        --resolve "test.example:8443:$SRV4" --resolve "test.example:8444:$SRV4" "$@"
}

# The issuer of the certificate a client sees for HOST:PORT (SNI HOST).
seen_issuer() {
    ip netns exec "$NS_CLI" openssl s_client -connect "$SRV4:${2:-443}" -servername "$1" \
        </dev/null 2>/dev/null | openssl x509 -noout -issuer 2>/dev/null
}
