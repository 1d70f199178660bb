# clients.py HOST PORT N MODE [SHA256]: N TCP connections at once, from
# one process (spec/e2e/embed/02-memory-limit.sh, scripts/bench/embed).
# MODE get: once all are connected, each GETs /1m.bin (Connection: close)
# and its body's sha256 is compared with SHA256; prints connected= refused=
# ok= bad= failed= unfinished=. MODE hold: prints connected= refused=
# timedout= and keeps them open until stdin ends.
import errno, hashlib, resource, selectors, socket, sys, time
host, port, n, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
want = sys.argv[5] if len(sys.argv) > 5 else ""
resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
sel = selectors.DefaultSelector()
conns, refused, pending = [], 0, {}
for i in range(n):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex((host, port))
    pending[s] = i
    sel.register(s, selectors.EVENT_WRITE)
deadline = time.time() + 60
while pending and time.time() < deadline:
    for key, _ in sel.select(1):
        s = key.fileobj
        e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        sel.unregister(s)
        del pending[s]
        if e == 0:
            conns.append(s)
        else:
            refused += e == errno.ECONNREFUSED
            s.close()
if mode == "hold":
    print("connected=%d refused=%d timedout=%d" % (len(conns), refused, len(pending)), flush=True)
    sys.stdin.read()  # until the test says so
    sys.exit(0)
req = b"GET /1m.bin HTTP/1.1\r\nHost: srv\r\nConnection: close\r\n\r\n"
bufs = {}
for s in conns:
    s.setblocking(True)
    s.sendall(req)
    s.setblocking(False)
    bufs[s] = bytearray()
    sel.register(s, selectors.EVENT_READ)
ok = bad = failed = 0
deadline = time.time() + 240
while bufs and time.time() < deadline:
    for key, _ in sel.select(1):
        s = key.fileobj
        try:
            d = s.recv(262144)
        except ConnectionError:
            d = None
        if d:
            bufs[s] += d
            continue
        b = bytes(bufs.pop(s))
        sel.unregister(s)
        s.close()
        body = b.split(b"\r\n\r\n", 1)[-1]
        if d is None:
            failed += 1
        elif hashlib.sha256(body).hexdigest() == want:
            ok += 1
        else:
            bad += 1
print("connected=%d refused=%d ok=%d bad=%d failed=%d unfinished=%d" % (
    len(conns), refused, ok, bad, failed, len(bufs)), flush=True)
