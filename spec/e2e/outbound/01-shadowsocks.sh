#!/usr/bin/env bash
# Shadowsocks AEAD through the TUN, one ss-server (shadowsocks-libev) per
# cipher in the server namespace: a 1 GiB download per cipher whose
# sha256 must equal the file's, a 16 MiB upload (PUT-less: a POST whose
# length nginx logs), the flow line names the proxy (policy=<name>), and
# the ciphertext on the wire to the proxy never carries the plaintext.
. "$(dirname "$0")/outlib.bash"
need_root
need_cmd ss-server
netns_setup
servers_start http

# Each cipher gets its own destination, so one chute serves all three.
#   aes-128-gcm            -> 10.200.0.2:80     (ss-server :8381)
#   aes-256-gcm            -> 10.200.0.2:8080   (ss-server :8382)
#   chacha20-ietf-poly1305 -> [fd20::2]:80      (ss-server :8383)
ss_start 8381 aes-128-gcm "pw-one"
ss_start 8382 aes-256-gcm "pw two with spaces"
ss_start 8383 chacha20-ietf-poly1305 "pw-three-\$!"
tun_bundle <<LUA
chute.proxy "ss128" { type = "shadowsocks", server = "$SRV4", port = 8381,
                      cipher = "aes-128-gcm", password = "pw-one" }
chute.proxy "ss256" { type = "shadowsocks", server = "$SRV4", port = 8382,
                      cipher = "aes-256-gcm", password = "pw two with spaces" }
chute.proxy "sschacha" { type = "ss", server = "$SRV4", port = 8383,
                         cipher = "chacha20-ietf-poly1305", password = "pw-three-\$!" }
function chute.route(flow)
  if flow.dst_ip == "$SRV4" and flow.dst_port == $HTTP_PORT then return "ss128" end
  if flow.dst_ip == "$SRV4" and flow.dst_port == $ALT_PORT then return "ss256" end
  if flow.dst_ip == "$SRV6" and flow.dst_port == $HTTP_PORT then return "sschacha" end
  return "DIRECT"
end
LUA
tun_chute_start

declare -A URL=([ss128]="http://$SRV4:$HTTP_PORT" [ss256]="http://$SRV4:$ALT_PORT" [sschacha]="http://[$SRV6]:$HTTP_PORT")
declare -A PORT=([ss128]=8381 [ss256]=8382 [sschacha]=8383)

check "a small GET through each cipher"
for p in ss128 ss256 sschacha; do
    got=$(cli_fetch_sha --max-time 10 "${URL[$p]}/small")
    assert_eq "$SHA_SMALL" "$got" "GET /small via $p"
done
assert_eq 3 "$(flow_lines "policy=(ss128|ss256|sschacha) .*close=done" | wc -l)" "three flow lines, each naming its proxy, closed normally"

check "nothing in clear on the wire to the proxy: a marker in the request never shows"
MARK="chute-cleartext-marker-$$"
# A raw capture of veth0 in the client namespace (every frame, both ways).
cat >"$NETNS_TMP/sniff.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(socket.SOL_SOCKET, 33, 256 << 20)  # SO_RCVBUFFORCE: lose nothing
s.bind((sys.argv[1], 0))
out = open(sys.argv[2], "wb", buffering=0)
open(sys.argv[3], "w").write("ready\n")
while True:
    out.write(s.recv(65536 + 64))
PY
bg_in "$NS_CLI" "$NETNS_TMP/sniff.log" "$PY" "$NETNS_TMP/sniff.py" veth0 "$NETNS_TMP/wire.raw" "$NETNS_TMP/sniff.ready"
TD=$BG_PID
wait_file "$NETNS_TMP/sniff.ready" 10 || fail "the capture did not start"
for p in ss128 ss256 sschacha; do
    got=$(cli_fetch_sha --max-time 10 -H "X-Marker: $MARK" "${URL[$p]}/1m.bin?$MARK")
    assert_eq "$SHA_1M" "$got" "GET /1m.bin via $p"
done
sleep 0.3
kill_wait "$TD" || true
bytes=$(stat -c %s "$NETNS_TMP/wire.raw")
assert_ge 3000000 "$bytes" "the capture holds the proxied traffic ($bytes bytes)"
check "the marker and the file's bytes are not on the wire"
found=$(python3 - "$NETNS_TMP/wire.raw" "$WWW/1m.bin" "$MARK" <<'PY'
import sys
wire = open(sys.argv[1], "rb").read()
body = open(sys.argv[2], "rb").read()
# the marker, an HTTP request line, and 64-byte pieces of the response body
needles = {"marker": sys.argv[3].encode(), "request line": b"GET /"}
for off in range(4096, len(body) - 64, 131072):
    needles[f"1m.bin@{off}"] = body[off:off + 64]
print(" ".join(k for k, v in needles.items() if v in wire) or "none")
PY
)
assert_eq none "$found" "plaintext found in the capture"
say "making the 1 GiB file"
big_file 1024
for p in ss128 ss256 sschacha; do
    t0=$(now)
    got=$(cli_fetch_sha --max-time 60 "${URL[$p]}/big.bin")
    secs=$(elapsed "$t0")
    say "1 GiB via $p in ${secs}s ($(awk -v s="$secs" 'BEGIN { printf "%.0f", 8192 / s }') Mbit/s)"
    assert_eq "$SHA_BIG" "$got" "the 1 GiB download's sha256 via $p"
    wait_log "policy=$p .* down=[0-9]{10,} " 10 || fail "no flow line with policy=$p and a 10-digit down="
    assert_eq 1 "$(count_flows_down_ge "policy=$p " "$BIG_SIZE")" "one $p flow line with down >= 1 GiB"
    line=$(flow_lines "policy=$p " | awk -v m="$BIG_SIZE" '{ d = $0; sub(/.* down=/, "", d); sub(/ .*/, "", d); if (d + 0 >= m) print }')
    assert_eq done "$(flow_field "$line" close)" "the $p download closed normally"
done

check "an upload through each cipher: 16 MiB POSTed, nginx read all of it"
head -c 16777216 /dev/urandom >"$NETNS_TMP/up.bin"
for p in ss128 ss256 sschacha; do
    code=$(cli_curl -o /dev/null -w '%{http_code}' --max-time 30 --data-binary "@$NETNS_TMP/up.bin" "${URL[$p]}/small") || true
    # nginx answers 405 to a POST on a static file, after reading the body
    assert_match '^(200|405)$' "$code" "the POST via $p got an answer"
    wait_log "policy=$p .* up=[0-9]{8,} " 10 || fail "no $p flow line with up >= 16 MiB"
done

stats_read
assert_eq 0 "$S_proxy_auth_failures" "proxy_auth_failures: none"
assert_decided_once
grep -q "ERROR" "$NETNS_TMP"/ss-*.log && fail "ss-server logged errors: $(grep -h ERROR "$NETNS_TMP"/ss-*.log | head -3)"
chute_alive
pass
