#!/usr/bin/env bash
# Half-close through the TUN, both ways round:
#  A: the client sends 256 KiB and shuts down its write side; the server
#     reads to EOF, waits, then answers (the digest of what it got, plus
#     128 KiB) and closes: the client's FIN went up while the other
#     direction still carried data.
#  B: the server sends 128 KiB and shuts down its write side first; the
#     client reads to EOF, then sends 256 KiB up and closes; the server
#     records what arrived.
. "$(dirname "$0")/../netns.sh"
need_root
tun_env_up http
PORT=9100

cat >"$NETNS_TMP/hc-server.py" <<'PY'
import hashlib, socket, sys, time
hosts, port, results, ready = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3], sys.argv[4]
def blob(n, seed):
    out, h = b"", seed.encode()
    while len(out) < n:
        h = hashlib.sha256(h).digest()
        out += h
    return out[:n]
def read_eof(c):
    got = b""
    while True:
        d = c.recv(65536)
        if not d:
            return got
        got += d
import selectors
sel = selectors.DefaultSelector()
for h in hosts:
    fam = socket.AF_INET6 if ":" in h else socket.AF_INET
    l = socket.socket(fam, socket.SOCK_STREAM)
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((h, port))
    l.listen(16)
    sel.register(l, selectors.EVENT_READ)
open(ready, "w").write("ready\n")
while True:
    for key, _ in sel.select():
        c, peer = key.fileobj.accept()
        c.settimeout(20)
        try:
            mode = c.recv(2)
            if mode == b"A\n":
                got = read_eof(c)          # the client's FIN arrived
                time.sleep(0.3)            # the connection stays half-open meanwhile
                c.sendall(f"{len(got)} {hashlib.sha256(got).hexdigest()}\n".encode() + blob(131072, "A"))
                c.close()
                line = f"A {len(got)} {hashlib.sha256(got).hexdigest()}"
            elif mode == b"B\n":
                c.sendall(blob(131072, "B"))
                c.shutdown(socket.SHUT_WR)  # server's FIN first
                got = read_eof(c)
                c.close()
                line = f"B {len(got)} {hashlib.sha256(got).hexdigest()}"
            else:
                line = f"? {mode!r}"
                c.close()
        except OSError as e:
            line = f"E {e}"
        with open(results, "a") as f:
            f.write(line + "\n")
PY
bg_in "$NS_SRV" "$NETNS_TMP/hc-server.log" "$PY" "$NETNS_TMP/hc-server.py" "$SRV4,$SRV6" \
    "$PORT" "$NETNS_TMP/hc-results" "$NETNS_TMP/hc-ready"
wait_file "$NETNS_TMP/hc-ready" 10 || fail "the half-close server did not start"

client() { # MODE HOST
    cli_py "$1" "$2" "$PORT" <<'PY'
import hashlib, socket, sys, time
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
def blob(n, seed):
    out, h = b"", seed.encode()
    while len(out) < n:
        h = hashlib.sha256(h).digest()
        out += h
    return out[:n]
def read_eof(s):
    got = b""
    while True:
        d = s.recv(65536)
        if not d:
            return got
        got += d
s = socket.create_connection((host, port), timeout=10)
up = blob(262144, "up")
if mode == "A":
    s.sendall(b"A\n" + up)
    s.shutdown(socket.SHUT_WR)
    t0 = time.time()
    got = read_eof(s)
    head, _, rest = got.partition(b"\n")
    want = f"{len(up)} {hashlib.sha256(up).hexdigest()}".encode()
    print("head-ok" if head == want else f"head-bad {head!r}",
          "body-ok" if rest == blob(131072, "A") else f"body-bad {len(rest)}",
          "waited-ok" if time.time() - t0 >= 0.25 else "waited-short")
else:
    s.sendall(b"B\n")
    got = read_eof(s)                      # the server's FIN
    ok = "body-ok" if got == blob(131072, "B") else f"body-bad {len(got)}"
    s.sendall(up)                          # still flows up after it
    s.shutdown(socket.SHUT_WR)
    rest = s.recv(1)                       # EOF again, no reset
    print(ok, "eof-ok" if rest == b"" else f"eof-bad {rest!r}",
          f"{len(up)} {hashlib.sha256(up).hexdigest()}")
s.close()
PY
}

up_sha=$("$PY" -c '
import hashlib
out, h = b"", b"up"
while len(out) < 262144:
    h = hashlib.sha256(h).digest(); out += h
print(262144, hashlib.sha256(out[:262144]).hexdigest())')

n=0
for host in "$SRV4" "$SRV6"; do
    check "A via $host: client FIN first, the server still answers"
    out=$(client A "$host" 2>&1) || fail "client A via $host: $out"
    assert_eq "head-ok body-ok waited-ok" "$out" "client A via $host got the server's digest and 128 KiB after its FIN"
    n=$((n + 1))
    wait_file "$NETNS_TMP/hc-results" 5
    assert_eq "A $up_sha" "$(sed -n "${n}p" "$NETNS_TMP/hc-results")" "the server read all 256 KiB to EOF (A via $host)"

    check "B via $host: server FIN first, the client still sends"
    out=$(client B "$host" 2>&1) || fail "client B via $host: $out"
    assert_eq "body-ok eof-ok $up_sha" "$out" "client B via $host read 128 KiB to EOF, then sent"
    n=$((n + 1))
    for i in $(seq 50); do [ "$(wc -l <"$NETNS_TMP/hc-results")" -ge "$n" ] && break; sleep 0.1; done
    assert_eq "B $up_sha" "$(sed -n "${n}p" "$NETNS_TMP/hc-results")" "the server got all 256 KiB after its own FIN (B via $host)"
done

check "four flows to :$PORT, each closed normally with the bytes of both directions"
assert_eq 4 "$(wait_log_count "-> \[?[0-9a-f.:]+\]?:$PORT policy=DIRECT .* close=done" 4 5)" "flow lines with close=done"
# Each run ends before the next starts: the lines come A, B, A, B.
lines=$(flow_lines "-> \[?[0-9a-f.:]+\]?:$PORT ")
A_LINES=$(sed -n '1p;3p' <<<"$lines")
B_LINES=$(sed -n '2p;4p' <<<"$lines")
assert_eq "262146 262146" "$(sed -n -E 's/.* up=([0-9]+) .*/\1/p' <<<"$A_LINES" | tr '\n' ' ' | sed 's/ $//')" "A flows: up=2+256 KiB"
assert_eq "262146 262146" "$(sed -n -E 's/.* up=([0-9]+) .*/\1/p' <<<"$B_LINES" | tr '\n' ' ' | sed 's/ $//')" "B flows: up=2+256 KiB"
assert_eq "131072 131072" "$(sed -n -E 's/.* down=([0-9]+) .*/\1/p' <<<"$B_LINES" | tr '\n' ' ' | sed 's/ $//')" "B flows: down=128 KiB"
# A: the answer is a 72-byte line + 128 KiB. down= counts bytes the client
# has ACKed (on_sent); with the client's FIN in first, the flow is freed as
# soon as the upstream's EOF queues our FIN, up to a window still
# unacknowledged: those bytes arrive but are not counted.
a_down=$(sed -n -E 's/.* down=([0-9]+) .*/\1/p' <<<"$A_LINES" | tr '\n' ' ' | sed 's/ $//')
check "A flows: down=72+128 KiB (every byte the client received)"
[ "$a_down" = "131144 131144" ] || fail "A flows (client FIN first) log down=$a_down, the client received 131144 each"
chute_alive
pass
