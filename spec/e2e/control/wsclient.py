"""A minimal WebSocket client for the control tests (stdlib only).

  wsclient.py PORT PATH SECONDS     prints each text message as a line
"""
import base64, hashlib, os, socket, struct, sys, time

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def connect(port, path, rcvbuf=None):
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16))
    s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + b"\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            raise SystemExit("closed during the handshake: " + repr(head))
        head += b
    lines = head.decode().split("\r\n")
    if not lines[0].startswith("HTTP/1.1 101"):
        raise SystemExit("no upgrade: " + lines[0])
    want = base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()
    if "Sec-WebSocket-Accept: " + want not in lines:
        raise SystemExit("bad Sec-WebSocket-Accept: " + repr(lines))
    return s


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


def read_message(s):
    h = recv_exact(s, 2)
    op, n = h[0] & 15, h[1] & 127
    if h[1] & 128:
        raise SystemExit("the server masked a frame")
    if n == 126:
        n = struct.unpack("!H", recv_exact(s, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", recv_exact(s, 8))[0]
    return op, recv_exact(s, n)


if __name__ == "__main__":
    port, path, secs = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    s = connect(port, path)
    s.settimeout(secs)
    end = time.time() + secs
    try:
        while time.time() < end:
            op, data = read_message(s)
            if op == 1:
                print(data.decode(), flush=True)
            elif op == 8:
                break
    except (socket.timeout, EOFError):
        pass
