#!/usr/bin/env python3
"""A minimal HTTP/2 client (stdlib only) for the MITM's RST_STREAM test:
GET PATH on stream 1, read some DATA, send RST_STREAM(CANCEL) for it, then
GET /echo on stream 3 over the same connection and print that answer's
status and body, proving the reset ended one stream, not the connection.

usage: h2_rst.py HOST ADDR PORT CAFILE PATH  (HOST: the SNI and :authority)
"""
import socket
import ssl
import struct
import sys


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def lit(name, value):
    # HPACK literal header field without indexing, new name, no Huffman
    def s(b):
        assert len(b) < 127
        return bytes([len(b)]) + b
    return b"\x00" + s(name) + s(value)


def headers(host, path):
    block = lit(b":method", b"GET") + lit(b":scheme", b"https") + lit(b":authority", host) + lit(b":path", path)
    return block


def read_frame(sock, buf):
    while len(buf) < 9:
        d = sock.recv(65536)
        if not d:
            raise EOFError
        buf += d
    n = int.from_bytes(buf[:3], "big")
    while len(buf) < 9 + n:
        d = sock.recv(65536)
        if not d:
            raise EOFError
        buf += d
    ftype, flags, sid = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
    return (ftype, flags, sid, bytes(buf[9:9 + n])), buf[9 + n:]


def main():
    host, addr, port, ca, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["h2"])
    raw = socket.create_connection((addr, port), timeout=20)
    s = ctx.wrap_socket(raw, server_hostname=host)
    assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()
    auth = ("%s:%d" % (host, port)).encode()
    # A large connection window, streams at the default 64 KiB: stream 1
    # stalls on its own window and never starves stream 3.
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0) +
              frame(8, 0, 0, struct.pack(">I", 1 << 24)))
    s.sendall(frame(1, 0x5, 1, headers(auth, path.encode())))  # END_STREAM|END_HEADERS
    buf = bytearray()
    got = 0
    while got < 30000:  # under the default 64 KiB window: no WINDOW_UPDATE needed
        (t, fl, sid, p), buf = read_frame(s, buf)
        if t == 4 and not fl & 1:
            s.sendall(frame(4, 1, 0))  # SETTINGS ACK
        if t == 0 and sid == 1:
            got += len(p)
    s.sendall(frame(3, 0, 1, struct.pack(">I", 8)))  # RST_STREAM CANCEL
    print("reset stream 1 after %d bytes" % got)
    s.sendall(frame(1, 0x5, 3, headers(auth, b"/echo?after=rst")))
    body = b""
    status = None
    while True:
        (t, fl, sid, p), buf = read_frame(s, buf)
        if sid != 3:
            continue
        if t == 1:
            status = "seen"
        if t == 0:
            body += p
        if fl & 1 and t in (0, 1):
            break
        if t == 3:
            print("stream 3 reset")
            return 1
    print("stream 3: headers %s body %s" % (status, body.decode(errors="replace").strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
