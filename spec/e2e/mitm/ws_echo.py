# A WebSocket echo server for the e2e suites: one text or binary frame in,
# the same payload back; argv: address port cert key ready-file (TLS), or
# address port - - ready-file (plain).
import base64, hashlib, socket, ssl, struct, sys, threading

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def recv_exact(c, n):
    b = b""
    while len(b) < n:
        d = c.recv(n - len(b))
        if not d:
            raise EOFError
        b += d
    return b


def serve(c):
    try:
        head = b""
        while b"\r\n\r\n" not in head:
            d = c.recv(4096)
            if not d:
                return
            head += d
        key = [l.split(b":", 1)[1].strip() for l in head.split(b"\r\n")
               if l.lower().startswith(b"sec-websocket-key:")][0]
        acc = base64.b64encode(hashlib.sha1(key + GUID).digest())
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                  b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + acc + b"\r\n\r\n")
        while True:
            b0, b1 = recv_exact(c, 2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", recv_exact(c, 2))[0]
            elif n == 127:
                n = struct.unpack(">Q", recv_exact(c, 8))[0]
            mask = recv_exact(c, 4) if b1 & 0x80 else b"\0\0\0\0"
            data = bytes(x ^ mask[i % 4] for i, x in enumerate(recv_exact(c, n)))
            if b0 & 0x0F == 8:
                return
            hdr = bytes([b0, n]) if n < 126 else bytes([b0, 126]) + struct.pack(">H", n)
            c.sendall(hdr + data)
    except (EOFError, OSError, IndexError):
        pass
    finally:
        c.close()


ctx = None
if sys.argv[3] != "-":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
open(sys.argv[5], "w").write("ready\n")
while True:
    c, _ = s.accept()
    try:
        if ctx is not None:
            c = ctx.wrap_socket(c, server_side=True)
    except (ssl.SSLError, OSError):
        c.close()
        continue
    threading.Thread(target=serve, args=(c,), daemon=True).start()
