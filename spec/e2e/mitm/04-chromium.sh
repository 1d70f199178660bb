#!/usr/bin/env bash
# A real browser through the MITM (root): Debian's headless Chromium in the
# client namespace, chute's CA trusted in its NSS database (certutil),
# loads a page through the TUN whose HTML a body hook rewrote; its net log
# shows the certificate it accepted was minted by chute for the host.
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
cat >"$WWW/page.html" <<'HTML'
<!doctype html><html><head><title>chute e2e</title></head>
<body><p id="t">ORIGINAL</p><img src="/small"></body></html>
HTML
export HOME=$NETNS_TMP/home
mkdir -p "$HOME/.pki/nssdb"
certutil -d "sql:$HOME/.pki/nssdb" -N --empty-password || fail "certutil: no NSS database"
certutil -d "sql:$HOME/.pki/nssdb" -A -n "chute e2e CA" -t "C,," -i "$CHUTE_CA" || fail "certutil -A"
dom=$(ip netns exec "$NS_CLI" timeout 60 chromium --headless=new --no-sandbox --disable-gpu \
    --no-first-run --user-data-dir="$NETNS_TMP/profile" \
    --host-resolver-rules="MAP test.example $SRV4" --log-net-log="$NETNS_TMP/netlog.json" \
    --net-log-capture-mode=Everything --dump-dom https://test.example/page.html 2>"$NETNS_TMP/chromium.err")
assert_match "rewritten by chute" "$dom" "Chromium rendered the page the hook rewrote"
grep -q 'GET /small ' "$NETNS_TMP/tls-access.log" || fail "the page's image was not fetched through chute"
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
