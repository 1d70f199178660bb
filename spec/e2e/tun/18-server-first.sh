#!/usr/bin/env bash
# A server that speaks first, through the TUN. A token bucket on the TUN
# (tc tbf: 100 bytes/s, 96 bytes of burst; this kernel has no netem)
# lets the client's SYN in at once and holds its handshake ACK for 160 ms
# (IPv4) or 560 ms (IPv6), so the server's bytes reach chute before the
# ACK does: chute reads them early (up to 2 KiB; the rest waits in the
# socket) and the client gets them all, in order, once the handshake is
# done. Every client packet is under the burst, so none is dropped; the
# client lifts the bucket at the first bytes.
#  G: the server sends a 40 KiB greeting, reads the client's line and
#     answers with its digest, then closes.
#  Q: the server sends 100 bytes and closes at once: the bytes and the
#     end both come before the handshake does.
. "$(dirname "$0")/../netns.sh"
need_root
CHUTE_RUN_ARGS="--log-level debug"
tun_env_up http
PORT=9110

cat >"$NETNS_TMP/sf-server.py" <<'PY'
import hashlib, socket, sys, selectors
hosts, port, ready = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3]
def blob(n, k):  # period 251, and the lengths are compared: a lost or doubled byte shows
    return bytes((i * k + 7) % 251 for i in range(n))
sel = selectors.DefaultSelector()
for h in hosts:
    for p in (port, port + 1):
        l = socket.socket(socket.AF_INET6 if ":" in h else socket.AF_INET, socket.SOCK_STREAM)
        l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        l.bind((h, p))
        l.listen(16)
        sel.register(l, selectors.EVENT_READ, p)
open(ready, "w").write("ready\n")
while True:
    for key, _ in sel.select():
        c, _ = key.fileobj.accept()
        c.settimeout(20)
        try:
            if key.data == port:  # G
                c.sendall(blob(40960, 131))
                line = b""
                while not line.endswith(b"\n"):
                    d = c.recv(4096)
                    if not d:
                        break
                    line += d
                c.sendall(hashlib.sha256(line).hexdigest().encode() + b"\n")
            else:  # Q
                c.sendall(blob(100, 17))
        except OSError:
            pass
        c.close()
PY
bg_in "$NS_SRV" "$NETNS_TMP/sf-server.log" "$PY" "$NETNS_TMP/sf-server.py" "$SRV4,$SRV6" \
    "$PORT" "$NETNS_TMP/sf-ready"
wait_file "$NETNS_TMP/sf-ready" 10 || fail "the server-first server did not start"

# The bucket holds the client's handshake ACK; the client lifts it once the
# first bytes came (the handshake is done by then), so the rest of the
# exchange runs at full speed, with offload or without.
client() { # MODE HOST PORT
    cli tc qdisc replace dev "$TUN_DEV" root tbf rate 800bit burst 96 limit 100000 ||
        fail "tc tbf on $TUN_DEV (the kernel's sch_tbf)"
    cli_py "$@" "$TUN_DEV" <<'PY'
import hashlib, socket, subprocess, sys
mode, host, port, dev = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def blob(n, k):
    return bytes((i * k + 7) % 251 for i in range(n))
s = socket.create_connection((host, port), timeout=10)
got = b""
want = blob(40960, 131) if mode == "G" else blob(100, 17)
while len(got) < len(want):
    d = s.recv(65536)
    if not d:
        break
    if not got:
        subprocess.run(["tc", "qdisc", "del", "dev", dev, "root"], check=True)
    got += d
res = ["greeting-ok" if got == want else f"greeting-bad {len(got)}"]
if mode == "G":
    line = b"hello from the client\n"
    s.sendall(line)
    ans = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        ans += d
    res.append("answer-ok" if ans == hashlib.sha256(line).hexdigest().encode() + b"\n" else f"answer-bad {ans!r}")
else:
    res.append("eof-ok" if s.recv(1) == b"" else "eof-bad")
s.close()
print(*res)
PY
}

for host in "$SRV4" "$SRV6"; do
    check "G via $host: a 40 KiB greeting before the handshake ends, then a request and its answer"
    out=$(client G "$host" "$PORT" 2>&1) || fail "client G via $host: $out"
    assert_eq "greeting-ok answer-ok" "$out" "client G via $host"

    check "Q via $host: 100 bytes and the server's close, both before the handshake ends"
    out=$(client Q "$host" $((PORT + 1)) 2>&1) || fail "client Q via $host: $out"
    assert_eq "greeting-ok eof-ok" "$out" "client Q via $host"
done

check "chute read the greetings early: 2 KiB held of G's 40 KiB, Q's 100 bytes"
early=$(grep -c "the upstream spoke first: .* (2048 held)" "$CHUTE_LOG" || true)
[ "$early" -ge 2 ] || fail "no flow held 2048 early bytes (G, both families): $(grep 'spoke first' "$CHUTE_LOG" | tail -n 4)"
early=$(grep -c "the upstream spoke first: 100 bytes .* (100 held)" "$CHUTE_LOG" || true)
[ "$early" -ge 2 ] || fail "no flow held Q's 100 early bytes (both families): $(grep 'spoke first' "$CHUTE_LOG" | tail -n 4)"

check "four flows, each closed normally"
assert_eq 4 "$(wait_log_count "-> \[?[0-9a-f.:]+\]?:($PORT|$((PORT + 1))) policy=DIRECT .* close=done" 4 5)" "flow lines with close=done"
chute_alive
pass
