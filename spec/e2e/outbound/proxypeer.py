# A small proxy server for the pool tests and bench (spec/e2e/outbound,
# scripts/bench/pool): SOCKS5 CONNECT (RFC 1928; RFC 1929 auth with
# --user/--pass) or HTTP CONNECT, the latter over TLS with --cert/--key (an
# https proxy; sessions resumable by ID, no tickets). What the pool tests
# need and the Debian servers lack:
#   --idle-close S   a connection that has sent no request within S seconds
#                    of its last byte is closed (a server's idle timeout)
#   every accepted connection is one line "accept N" in the log, every idle
#   close "idle-close N": the tests count the server side's connections.
# Usage: proxypeer.py socks5|http ADDR PORT [--user U --pass P]
#        [--cert F --key F] [--idle-close S] [--ready FILE]
import argparse, select, socket, ssl, struct, sys, threading

ap = argparse.ArgumentParser()
ap.add_argument("proto", choices=["socks5", "http"])
ap.add_argument("addr")
ap.add_argument("port", type=int)
ap.add_argument("--user")
ap.add_argument("--pass", dest="password")
ap.add_argument("--cert")
ap.add_argument("--key")
ap.add_argument("--idle-close", type=float, default=0)
ap.add_argument("--ready")
a = ap.parse_args()

lock = threading.Lock()
accepted = 0


def log(msg):
    with lock:
        print(msg, flush=True)


class Idle(Exception):
    pass


def recv_exact(c, n):
    b = b""
    while len(b) < n:
        try:
            d = c.recv(n - len(b))
        except socket.timeout:
            raise Idle()
        if not d:
            raise EOFError()
        b += d
    return b


def socks5(c):
    ver, n = recv_exact(c, 2)
    methods = recv_exact(c, n)
    want = 2 if a.user else 0
    if ver != 5 or want not in methods:
        c.sendall(b"\x05\xff")
        return None
    c.sendall(bytes([5, want]))
    if want == 2:
        _, ul = recv_exact(c, 2)
        u = recv_exact(c, ul)
        pl = recv_exact(c, 1)[0]
        p = recv_exact(c, pl)
        ok = u.decode() == a.user and p.decode() == a.password
        c.sendall(b"\x01\x00" if ok else b"\x01\x01")
        if not ok:
            return None
    ver, cmd, _, atyp = recv_exact(c, 4)
    if atyp == 1:
        host = socket.inet_ntop(socket.AF_INET, recv_exact(c, 4))
    elif atyp == 4:
        host = socket.inet_ntop(socket.AF_INET6, recv_exact(c, 16))
    else:
        host = recv_exact(c, recv_exact(c, 1)[0]).decode()
    port = struct.unpack("!H", recv_exact(c, 2))[0]
    c.settimeout(None)
    try:
        u = socket.create_connection((host, port), timeout=5)
    except OSError:
        c.sendall(b"\x05\x05\x00\x01" + bytes(6))
        return None
    u.settimeout(None)
    c.sendall(b"\x05\x00\x00\x01" + bytes(6))
    return u


def http(c):
    head = b""
    while b"\r\n\r\n" not in head:
        try:
            d = c.recv(4096)
        except socket.timeout:
            raise Idle()
        if not d or len(head) > 16384:
            raise EOFError()
        head += d
    line = head.split(b"\r\n", 1)[0].decode().split()
    if len(line) < 2 or line[0] != "CONNECT":
        c.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
        return None
    host, _, port = line[1].rpartition(":")
    c.settimeout(None)
    try:
        u = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
    except OSError:
        c.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
        return None
    u.settimeout(None)
    c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    extra = head.split(b"\r\n\r\n", 1)[1]
    if extra:
        u.sendall(extra)
    return u


def relay(c, u):
    """Both ways on this thread (an SSL object is not for two threads). The
    destination's end ends the tunnel: a TLS client gets close_notify."""
    up_open = True
    while True:
        tls_pending = isinstance(c, ssl.SSLSocket) and c.pending() > 0
        ready = [c] if tls_pending else select.select([c, u] if up_open else [u], [], [])[0]
        for src in ready:
            try:
                d = src.recv(65536)
            except ssl.SSLWantReadError:
                continue
            if src is c:
                if d:
                    u.sendall(d)
                else:
                    up_open = False
                    u.shutdown(socket.SHUT_WR)
                continue
            if d:
                c.sendall(d)
                continue
            if isinstance(c, ssl.SSLSocket):
                c.settimeout(2)
                c = c.unwrap()  # close_notify, then the client's
            else:
                c.shutdown(socket.SHUT_WR)
            return


def serve(c, n, ctx):
    u = None
    try:
        if a.idle_close > 0:
            c.settimeout(a.idle_close)
        if ctx is not None:
            c = ctx.wrap_socket(c, server_side=True)
        u = socks5(c) if a.proto == "socks5" else http(c)
        if u is None:
            return
        relay(c, u)
    except Idle:
        log(f"idle-close {n}")
    except (OSError, EOFError, ValueError, ssl.SSLError):
        pass
    finally:
        for s in (c, u):
            if s is not None:
                try:
                    if isinstance(s, ssl.SSLSocket):
                        s.settimeout(1)
                        s.unwrap()  # close_notify: the client keeps the session
                except (OSError, ValueError, ssl.SSLError):
                    pass
                try:
                    s.close()
                except OSError:
                    pass


ctx = None
if a.cert:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    ctx.options |= ssl.OP_NO_TICKET  # resumption by session ID, as BearSSL does
    ctx.set_alpn_protocols(["http/1.1"])
fam = socket.AF_INET6 if ":" in a.addr else socket.AF_INET
ls = socket.socket(fam, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((a.addr, a.port))
ls.listen(1024)
if a.ready:
    open(a.ready, "w").write("ready\n")
while True:
    c, _ = ls.accept()
    accepted += 1
    log(f"accept {accepted}")
    threading.Thread(target=serve, args=(c, accepted, ctx), daemon=True).start()
