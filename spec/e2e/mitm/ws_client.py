# A WebSocket client: handshake, one masked frame, the echo; prints the
# response status line and the echoed payload.
# argv: address port sni cafile payload (TLS), or address port host - payload
# [URL] (plain; with URL, an HTTP proxy at address:port is asked for it).
import base64, os, socket, ssl, sys

c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
if sys.argv[4] != "-":
    ctx = ssl.create_default_context(cafile=sys.argv[4])
    c = ctx.wrap_socket(c, server_hostname=sys.argv[3])
target = sys.argv[6].encode() if len(sys.argv) > 6 else b"/ws"
key = base64.b64encode(os.urandom(16))
c.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: " + sys.argv[3].encode() + b"\r\nUpgrade: websocket\r\n"
          b"Connection: Upgrade\r\nSec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    d = c.recv(4096)
    if not d:
        break
    head += d
status, _, rest = head.partition(b"\r\n")
payload = sys.argv[5].encode()
mask = os.urandom(4)
c.sendall(bytes([0x81, 0x80 | len(payload)]) + mask +
          bytes(x ^ mask[i % 4] for i, x in enumerate(payload)))
buf = head.split(b"\r\n\r\n", 1)[1]
while len(buf) < 2 + len(payload):
    d = c.recv(4096)
    if not d:
        break
    buf += d
print(status.decode())
print(buf[2:2 + len(payload)].decode(errors="replace"))
