#!/usr/bin/env bash
# Malformed SOCKS5 and HTTP proxy requests from raw sockets: each gets its
# exact protocol answer (or a close where the protocol has none), and chute
# keeps serving afterwards.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start
bundle_write <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
chute_start

# wire_cases KIND: runs the python cases for "socks" or "http" against the
# listeners; prints a check line per case, exits 1 at the first mismatch.
wire_cases() {
    python3 - "$1" "$SOCKS_PORT" "$HTTP_PORT" "$ORIGIN_PORT" "$TEST_NAME" <<'PY'
import socket, sys, time

kind, socks_port, http_port, origin_port, name = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5]

def check(msg):
    print(f"{name}: check: {msg}", flush=True)

def fail(msg):
    print(f"{name}: FAIL: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)

def conn(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(5)
    return s

def read_until_close(s, limit=1 << 20):
    """Everything the peer sends until it closes: (bytes, how it ended)."""
    out = b""
    try:
        while len(out) < limit:
            b = s.recv(65536)
            if not b:
                return out, "closed"
            out += b
    except ConnectionResetError:
        return out, "reset"
    except socket.timeout:
        return out, "still open after 5 s"
    return out, "too much data"

def expect_exact(msg, s, want):
    """The peer sends exactly |want| and closes."""
    check(msg)
    got, end = read_until_close(s)
    if got != want or end == "still open after 5 s":
        fail(f"{msg}: expected {want.hex() or 'nothing'} then close, got {got.hex() or 'nothing'} ({end})")

def expect_bytes(msg, s, want):
    """The next len(want) bytes are |want| (the connection stays usable)."""
    check(msg)
    got = b""
    while len(got) < len(want):
        b = s.recv(len(want) - len(got))
        if not b:
            break
        got += b
    if got != want:
        fail(f"{msg}: expected {want.hex()}, got {got.hex() or 'nothing'}")

def socks_reply(rep):
    # VER REP RSV ATYP=1 0.0.0.0:0: a failure reply carries no bound address.
    return bytes([5, rep, 0, 1, 0, 0, 0, 0, 0, 0])

def socks_cases():
    s = conn(socks_port)
    s.sendall(b"\x04\x01\x00\x50\x7f\x00\x00\x01\x00")  # a SOCKS4 CONNECT
    # RFC 1928 has no reply for a version it does not speak: close silently.
    expect_exact("wrong version byte (4): closed without a reply", s, b"")

    s = conn(socks_port)
    s.sendall(b"\x05\x00")
    # NMETHODS must be 1..255. "No acceptable method" (05 FF) or a silent
    # close are both protocol answers; accepting a method is not.
    check("NMETHODS 0: 05 FF or a silent close")
    got, end = read_until_close(s)
    if got not in (b"", b"\x05\xff") or end == "still open after 5 s":
        fail(f"NMETHODS 0: got {got.hex() or 'nothing'} ({end})")

    s = conn(socks_port)
    s.sendall(b"\x05\x01\x01")  # offers GSSAPI only
    expect_exact("only an unsupported method offered: method 0xFF, then close", s, b"\x05\xff")

    s = conn(socks_port)
    s.sendall(b"\x05\x01\x00")
    expect_bytes("greeting with no-auth: method 0x00", s, b"\x05\x00")
    s.sendall(b"\x05\x01\x00\x09" + b"\x7f\x00\x00\x01\x00\x50")
    expect_exact("ATYP 9: reply REP 8 (address type not supported), then close", s, socks_reply(8))

    s = conn(socks_port)
    s.sendall(b"\x05\x01\x00")
    expect_bytes("greeting with no-auth: method 0x00", s, b"\x05\x00")
    s.sendall(b"\x05\x02\x00\x01\x7f\x00\x00\x01" + origin_port.to_bytes(2, "big"))
    expect_exact("BIND command: reply REP 7 (command not supported), then close", s, socks_reply(7))

    s = conn(socks_port)
    s.sendall(b"\x05\x01\x00")
    expect_bytes("greeting with no-auth: method 0x00", s, b"\x05\x00")
    s.sendall(b"\x05\x01\x00\x03\x03a\x00b\x00\x50")  # a NUL inside the name
    expect_exact("domain name with a NUL: reply REP 1 (general failure), then close", s, socks_reply(1))

    s = conn(socks_port)
    s.sendall(b"\x05\x02\x00")  # promises 2 methods, sends 1
    s.shutdown(socket.SHUT_WR)
    expect_exact("truncated greeting then half-close: closed without a reply", s, b"")

    s = conn(socks_port)
    s.sendall(b"\x05\x01\x00")
    expect_bytes("greeting with no-auth: method 0x00", s, b"\x05\x00")
    s.sendall(b"\x05\x01\x00\x03\x0aexa")  # name of 10 bytes, 3 sent
    s.shutdown(socket.SHUT_WR)
    expect_exact("truncated request then half-close: closed without a reply", s, b"")

    s = conn(socks_port)
    s.sendall(b"\x05\x01\x00")
    expect_bytes("greeting with no-auth: method 0x00", s, b"\x05\x00")
    s.close()  # abandoned mid-handshake

    # A valid handshake and request trickled one byte at a time must work.
    s = conn(socks_port)
    hello = b"\x05\x01\x00"
    req = b"\x05\x01\x00\x01\x7f\x00\x00\x01" + origin_port.to_bytes(2, "big")
    for b in hello:
        s.send(bytes([b])); time.sleep(0.01)
    expect_bytes("byte-by-byte greeting: method 0x00", s, b"\x05\x00")
    for b in req:
        s.send(bytes([b])); time.sleep(0.01)
    check("byte-by-byte request: reply REP 0")
    head = s.recv(4)
    if head[:2] != b"\x05\x00":
        fail(f"byte-by-byte request: got {head.hex()}")
    s.recv(6 if head[3] == 1 else 18)  # BND.ADDR + BND.PORT
    s.sendall(b"GET /small HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
    got, _ = read_until_close(s)
    check("byte-by-byte: the tunnelled GET answers 200")
    if not got.startswith(b"HTTP/1.1 200"):
        fail(f"byte-by-byte: tunnelled GET got {got[:40]!r}")

def http_status(msg, payload, allowed):
    """Send |payload|; the answer's status must be in |allowed|, then close."""
    check(msg)
    s = conn(http_port)
    try:
        s.sendall(payload)
    except (BrokenPipeError, ConnectionResetError):
        pass  # answered and closed before all of it was sent: read the answer
    got, end = read_until_close(s)
    line = got.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or parts[1] not in allowed:
        fail(f"{msg}: expected status {'/'.join(allowed)}, got {line!r} ({end})")
    if end != "closed" and end != "reset":
        fail(f"{msg}: the connection was not closed after the error ({end})")

def http_cases():
    http_status("garbage request line: 400", b"HELLO\r\n\r\n", ["400"])
    http_status("origin-form 'GET / HTTP/1.1' (no absolute URI): 400",
                b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", ["400"])
    # 431 (RFC 6585) is the precise answer to an oversized head; 400 is allowed too.
    http_status("100 KB header: 431 or 400",
                b"GET http://127.0.0.1:%d/small HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: %s\r\n\r\n"
                % (origin_port, b"a" * 100000), ["431", "400"])
    http_status("CONNECT with port 99999: 400",
                b"CONNECT 127.0.0.1:99999 HTTP/1.1\r\nHost: 127.0.0.1:99999\r\n\r\n", ["400"])
    http_status("CONNECT without a port: 400",
                b"CONNECT 127.0.0.1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", ["400"])

socks_cases() if kind == "socks" else http_cases()
PY
}

say "malformed SOCKS5"
wire_cases socks
chute_alive

say "chute still serves SOCKS5"
got=$(fetch_sha -x "socks5h://127.0.0.1:$SOCKS_PORT" "http://localhost:$ORIGIN_PORT/1m.bin")
assert_eq "$SHA_1M" "$got" "a download through SOCKS5 after the bad input"
# Flows: the byte-by-byte request and this download; nothing that failed
# to parse or asked for BIND may have become a flow.
assert_eq 2 "$(wait_log_count 'flow [0-9]+ tcp ' 2)" "only the two good requests opened flows"

say "malformed HTTP proxy requests"
wire_cases http
chute_alive

say "chute still serves both inbounds"
got=$(fetch_sha -x "socks5h://127.0.0.1:$SOCKS_PORT" "http://localhost:$ORIGIN_PORT/1m.bin")
assert_eq "$SHA_1M" "$got" "a download through SOCKS5 after the bad input"
got=$(fetch_sha -x "http://127.0.0.1:$HTTP_PORT" "http://127.0.0.1:$ORIGIN_PORT/1m.bin")
assert_eq "$SHA_1M" "$got" "a download through the HTTP proxy after the bad input"
e2e_pass
