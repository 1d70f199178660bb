#!/usr/bin/env bash
# A real browser through the MITM (root): Debian's headless Chromium in the
# client namespace, chute's CA trusted in its NSS database (certutil),
# loads a page of 100 images through the TUN whose HTML a body hook
# rewrote, over h2 to chute (the origin speaks HTTP/1.1: translated); its
# net log shows h2 and that the certificate it accepted was minted by chute
# for the host.
. "$(dirname "$0")/mitmlib.bash"
need_root
need_cmd chromium certutil
mitm_env_up '  mitm = { hosts = { "test.example" } },' <<'LUA'
chute.on_response([[^https://test\.example/page\.html$]], function(resp, req)
  resp.body = resp.body:gsub("ORIGINAL", "rewritten by chute")
  resp.headers["x-chute"] = "page"
end, { body = true })
function chute.route(flow)
  return "DIRECT"
end
LUA
{
    echo '<!doctype html><html><head><title>chute e2e</title></head>'
    echo '<body><p id="t">ORIGINAL</p>'
    for i in $(seq 100); do printf '<img src="/small?i=%d">' "$i"; done
    echo '</body></html>'
} >"$WWW/page.html"
export HOME=$NETNS_TMP/home
mkdir -p "$HOME/.pki/nssdb"
certutil -d "sql:$HOME/.pki/nssdb" -N --empty-password || fail "certutil: no NSS database"
certutil -d "sql:$HOME/.pki/nssdb" -A -n "chute e2e CA" -t "C,," -i "$CHUTE_CA" || fail "certutil -A"
dom=$(ip netns exec "$NS_CLI" timeout 60 chromium --headless=new --no-sandbox --disable-gpu \
    --no-first-run --user-data-dir="$NETNS_TMP/profile" \
    --host-resolver-rules="MAP test.example $SRV4" --log-net-log="$NETNS_TMP/netlog.json" \
    --net-log-capture-mode=Everything --dump-dom https://test.example/page.html 2>"$NETNS_TMP/chromium.err")
assert_match "rewritten by chute" "$dom" "Chromium rendered the page the hook rewrote"
for _ in $(seq 50); do
    [ "$(grep -c 'GET /small?i=' "$NETNS_TMP/tls-access.log")" -ge 100 ] && break
    sleep 0.1
done
assert_eq 100 "$(grep -c 'GET /small?i=' "$NETNS_TMP/tls-access.log")" \
    "the page's 100 images came through chute"
assert_match '"(negotiated_protocol|next_proto|alpn)": ?"h2"' "$(cat "$NETNS_TMP/netlog.json")" \
    "Chromium spoke h2 to chute (its net log)"
stats_read
assert_ge 1 "$S_mitm_h2_client_conns" "an h2 client connection, translated to the HTTP/1.1 origin"
assert_ge 100 "$S_mitm_h1_upstream_parked" "the origin's HTTP/1.1 connections were pooled"
check "the net log holds the certificate Chromium accepted: chute's, for test.example"
"$PY" - "$NETNS_TMP/netlog.json" >"$NETNS_TMP/leaf.pem" <<'PY'
import json, sys
txt = open(sys.argv[1]).read()
try:
    log = json.loads(txt)
except ValueError:  # a log cut short at exit: close it
    log = json.loads(txt.rstrip().rstrip(",") + "]}")
for ev in log.get("events", []):
    certs = (ev.get("params") or {}).get("certificates")
    if certs:
        print(certs[0])
        break
PY
[ -s "$NETNS_TMP/leaf.pem" ] || fail "no certificate in Chromium's net log"
assert_match "chute CA" "$(openssl x509 -in "$NETNS_TMP/leaf.pem" -noout -issuer)" "issued by chute's CA"
assert_match "DNS:test.example" "$(openssl x509 -in "$NETNS_TMP/leaf.pem" -noout -ext subjectAltName)" \
    "minted for test.example"
assert_eq 0 "$(log_count 'closed right after the handshake')" \
    "the browser's unused preconnects are not taken for a pinned client"
chute_alive
pass
