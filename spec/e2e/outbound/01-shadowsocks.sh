#!/usr/bin/env bash
# Shadowsocks AEAD through the TUN, one ss-server (shadowsocks-libev) per
# cipher in the server namespace: a 1 GiB download per cipher whose
# sha256 must equal the file's, a 64 MiB upload whose sha256 the sink
# checks, the flow line names the proxy (policy=<name>), and
# the ciphertext on the wire to the proxy never carries the plaintext.
. "$(dirname "$0")/outlib.bash"
need_root
need_cmd ss-server
netns_setup
servers_start http dns

# Each cipher gets its own destination, so one chute serves all three.
#   aes-128-gcm            -> 10.200.0.2:80     (ss-server :8381)
#   aes-256-gcm            -> 10.200.0.2:8080   (ss-server :8382)
#   chacha20-ietf-poly1305 -> [fd20::2]:80      (ss-server :8383)
ss_start 8381 aes-128-gcm "pw-one"
ss_start 8382 aes-256-gcm "pw two with spaces"
ss_start 8383 chacha20-ietf-poly1305 "pw-three-\$!"
tun_bundle "  dns = { upstream = \"$SRV4\", persist = false }," <<LUA
chute.proxy "ss128" { type = "shadowsocks", server = "$SRV4", port = 8381,
                      cipher = "aes-128-gcm", password = "pw-one" }
chute.proxy "ss256" { type = "shadowsocks", server = "$SRV4", port = 8382,
                      cipher = "aes-256-gcm", password = "pw two with spaces" }
chute.proxy "sschacha" { type = "ss", server = "$SRV4", port = 8383,
                         cipher = "chacha20-ietf-poly1305", password = "pw-three-\$!" }
chute.proxy "byname" { type = "shadowsocks", server = "test.example", port = 8382,
                       cipher = "aes-256-gcm", password = "pw two with spaces" }
local by_port = { [9001] = "ss128", [9002] = "ss256", [9003] = "sschacha" }
function chute.route(flow)
  if flow.dst_ip == "$SRV4" and flow.dst_port == $HTTP_PORT then return "ss128" end
  if flow.dst_ip == "$SRV4" and flow.dst_port == $ALT_PORT then return "ss256" end
  if flow.dst_ip == "$SRV6" and flow.dst_port == $HTTP_PORT then return "sschacha" end
  if flow.dst_ip == "$SRV6" and flow.dst_port == $ALT_PORT then return "byname" end
  return by_port[flow.dst_port] or "DIRECT"
end
LUA
tun_chute_start

declare -A URL=([ss128]="http://$SRV4:$HTTP_PORT" [ss256]="http://$SRV4:$ALT_PORT" [sschacha]="http://[$SRV6]:$HTTP_PORT")

check "a small GET through each cipher"
for p in ss128 ss256 sschacha; do
    got=$(cli_fetch_sha --max-time 10 "${URL[$p]}/small")
    assert_eq "$SHA_SMALL" "$got" "GET /small via $p"
done
# The FIN to ss-server waits until it has been quiet for a moment (it ends
# both directions at a FIN), so the close lines come a little later.
for _ in $(seq 50); do
    [ "$(flow_lines "policy=(ss128|ss256|sschacha) .*close=done" | wc -l)" -ge 3 ] && break
    sleep 0.1
done
assert_eq 3 "$(flow_lines "policy=(ss128|ss256|sschacha) .*close=done" | wc -l)" "three flow lines, each naming its proxy, closed normally"
check "a proxy named by a DNS name (test.example, resolved by chute through dnsmasq)"
assert_eq "$SHA_1M" "$(cli_fetch_sha --max-time 10 "http://[$SRV6]:$ALT_PORT/1m.bin")" "GET /1m.bin via byname"
assert_log "policy=byname .*down=1048[0-9]{3} .*close=done" "the byname flow line"

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
say "making the big file (${BIG_MIB:-1024} MiB)"
big_file ${BIG_MIB:-1024}
for p in ss128 ss256 sschacha; do
    t0=$(now)
    got=$(cli_fetch_sha --max-time 60 "${URL[$p]}/big.bin")
    secs=$(elapsed "$t0")
    say "big.bin via $p in ${secs}s ($(awk -v s="$secs" -v b="$BIG_SIZE" 'BEGIN { printf "%.0f", b * 8 / 1e6 / s }') Mbit/s)"
    assert_eq "$SHA_BIG" "$got" "the big download's sha256 via $p"
    assert_eq 1 "$(flows_down_ge "policy=$p " "$BIG_SIZE" 1)" "one $p flow line with down >= $BIG_SIZE"
    line=$(flow_lines "policy=$p " | awk -v m="$BIG_SIZE" '{ d = $0; sub(/.* down=/, "", d); sub(/ .*/, "", d); if (d + 0 >= m) print }')
    assert_eq "done" "$(flow_field "$line" close)" "the $p download closed normally"
done

check "an upload through each cipher: 64 MiB to a sink that answers with their sha256"
cat >"$NETNS_TMP/sink.py" <<'PY'
import hashlib, socket, sys, threading
# Reads exactly 64 MiB (ss-server closes both ways at the client's FIN:
# no half-close through it), then answers with their digest.
def serve(c):
    h, left = hashlib.sha256(), 64 << 20
    while left > 0:
        d = c.recv(min(left, 1 << 20))
        if not d:
            break
        h.update(d)
        left -= len(d)
    c.sendall(h.hexdigest().encode())
    c.close()
def listen(port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((sys.argv[1], port))
    ls.listen(16)
    while True:
        threading.Thread(target=serve, args=(ls.accept()[0],), daemon=True).start()
for port in (9001, 9002, 9003):
    threading.Thread(target=listen, args=(port,), daemon=True).start()
open(sys.argv[2], "w").write("ready\n")
threading.Event().wait()
PY
bg_in "$NS_SRV" "$NETNS_TMP/sink.log" "$PY" "$NETNS_TMP/sink.py" "$SRV4" "$NETNS_TMP/sink.ready"
wait_file "$NETNS_TMP/sink.ready" 10 || fail "the sink did not start"
wait_tcp "$NS_SRV" "$SRV4" 9003 10 || fail "the sink does not accept"
for port in 9001 9002 9003; do
    out=$(cli_py "$SRV4" "$port" <<'PY'
import hashlib, os, socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
h = hashlib.sha256()
block = os.urandom(1 << 20)
for i in range(64):
    b = bytes([i]) + block[1:]
    h.update(b)
    s.sendall(b)
got = b""
while True:
    d = s.recv(100)
    if not d:
        break
    got += d
print("same" if got.decode() == h.hexdigest() else f"differs: {got!r}")
PY
    ) || fail "the upload to :$port failed: $out"
    assert_eq same "$out" "64 MiB uploaded to :$port arrived intact"
done
for p in ss128 ss256 sschacha; do
    assert_eq 1 "$(flow_lines "policy=$p .* up=67108864 down=64 .*close=done" | wc -l)" "the $p upload's flow line: up=64 MiB, down=64, closed normally"
done

stats_read
assert_eq 0 "$S_proxy_auth_failures" "proxy_auth_failures: none"
assert_decided_once
grep -q "ERROR" "$NETNS_TMP"/ss-*.log && fail "ss-server logged errors: $(grep -h ERROR "$NETNS_TMP"/ss-*.log | head -3)"
chute_alive
pass
