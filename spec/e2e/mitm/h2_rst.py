#!/usr/bin/env python3
"""A minimal HTTP/2 client (stdlib only) for the MITM's stream tests:
GET PATH on stream 1, read some DATA, send RST_STREAM(CANCEL) for it, then
GET /echo on stream 3 over the same connection and print that answer's
status and body, proving the reset ended one stream, not the connection.
With "slow": stream 1 is not reset but left unread (its 64 KiB window never
reopened) until stream 3 has its answer; then its window opens and its
bytes are counted to the end: one stalled stream stalls no other, and
loses nothing.

usage: h2_rst.py HOST ADDR PORT CAFILE PATH [slow]  (HOST: the SNI and :authority)
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
    slow = len(sys.argv) > 6 and sys.argv[6] == "slow"
    if slow:
        s.settimeout(1.5)
        try:  # until the stream's window is spent: chute sends no more
            while True:
                (t, fl, sid, p), buf = read_frame(s, buf)
                if t == 0 and sid == 1:
                    got += len(p)
        except socket.timeout:
            pass
        s.settimeout(20)
        print("stream 1 stalled after %d bytes" % got)
    else:
        s.sendall(frame(3, 0, 1, struct.pack(">I", 8)))  # RST_STREAM CANCEL
        print("reset stream 1 after %d bytes" % got)
    s.sendall(frame(1, 0x5, 3, headers(auth, b"/echo?after=" + (b"stall" if slow else b"rst"))))
    body = b""
    status = None
    while True:
        (t, fl, sid, p), buf = read_frame(s, buf)
        if t == 0 and sid == 1:
            got += len(p)  # what was in flight before the stall
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
    if slow:  # now read stream 1 to its end
        s.sendall(frame(8, 0, 1, struct.pack(">I", (1 << 31) - 1 - 65535)))
        while True:
            (t, fl, sid, p), buf = read_frame(s, buf)
            if sid == 1 and t == 0:
                got += len(p)
                if len(p) > 0:
                    s.sendall(frame(8, 0, 0, struct.pack(">I", len(p))))
            if sid == 1 and (t == 3 or (fl & 1 and t in (0, 1))):
                break
        print("stream 1: %d bytes in all" % got)
    return 0


if __name__ == "__main__":
    sys.exit(main())
