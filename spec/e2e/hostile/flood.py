#!/usr/bin/env python3
"""Hostile clients for spec/e2e/hostile (bounded in count and time).

hold HOST PORT N [--src IP] [--send HEX] [--trickle HEX --interval S]
     [--secs S] [--ready FILE] [--connect-timeout S]
    Opens N TCP connections (from source address IP), sends HEX once, or
    trickles the bytes of --trickle one per interval, and holds them for S
    seconds, watching each for the peer's close. Touches FILE once all are
    open. Prints one JSON object: opened, and closed_at (seconds after its
    open, or null) per connection in the order they were opened.
"""
import argparse, json, os, selectors, socket, sys, time


def hold(a):
    sel = selectors.DefaultSelector()
    conns, opened_at, closed_at = [], [], []
    fam = socket.AF_INET6 if ":" in a.host else socket.AF_INET
    for i in range(a.n):
        s = socket.socket(fam, socket.SOCK_STREAM)
        try:
            if a.src:
                s.bind((a.src, 0))
            s.settimeout(a.connect_timeout)
            s.connect((a.host, a.port))
            if a.send:
                s.sendall(bytes.fromhex(a.send))
            s.setblocking(False)
        except OSError:
            s.close()
            continue
        sel.register(s, selectors.EVENT_READ, len(conns))
        conns.append(s)
        opened_at.append(time.monotonic())
        closed_at.append(None)
    if a.ready:
        open(a.ready, "w").write("%d\n" % len(conns))
    trickle = bytes.fromhex(a.trickle) if a.trickle else b""
    sent = 0
    next_drip = time.monotonic() + a.interval
    end = time.monotonic() + a.secs
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if trickle and now >= next_drip:
            next_drip = now + a.interval
            if sent < len(trickle):
                for i, s in enumerate(conns):
                    if closed_at[i] is None:
                        try:
                            s.send(trickle[sent:sent + 1])
                        except OSError:
                            pass
                sent += 1
        timeout = min(end, next_drip if trickle else end) - now
        for key, _ in sel.select(max(0.01, timeout)):
            i = key.data
            try:
                data = key.fileobj.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                closed_at[i] = round(time.monotonic() - opened_at[i], 3)
                sel.unregister(key.fileobj)
    for s in conns:
        s.close()
    print(json.dumps({"opened": len(conns), "closed_at": closed_at}))


def socks(a):
    """One SOCKS5 CONNECT to HOST:PORT by name through the proxy; prints
    the REP code (or "closed") and the seconds it took."""
    t0 = time.monotonic()
    rep = "closed"
    try:
        s = socket.create_connection((a.host, a.port), timeout=a.secs)
        s.settimeout(a.secs)
        s.sendall(b"\x05\x01\x00")
        if s.recv(2) == b"\x05\x00":
            name = a.name.encode()
            s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name + a.dport.to_bytes(2, "big"))
            r = s.recv(10)
            if len(r) >= 2:
                rep = str(r[1])
    except socket.timeout:
        rep = "timeout"
    except OSError:
        pass
    print("%s %.2f" % (rep, time.monotonic() - t0))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("hold")
    h.add_argument("host")
    h.add_argument("port", type=int)
    h.add_argument("n", type=int)
    h.add_argument("--src")
    h.add_argument("--send")
    h.add_argument("--trickle")
    h.add_argument("--interval", type=float, default=1.0)
    h.add_argument("--secs", type=float, default=5.0)
    h.add_argument("--ready")
    h.add_argument("--connect-timeout", type=float, default=3.0)
    k = sub.add_parser("socks")
    k.add_argument("host")
    k.add_argument("port", type=int)
    k.add_argument("name")
    k.add_argument("dport", type=int)
    k.add_argument("--secs", type=float, default=30.0)
    a = p.parse_args()
    if a.cmd == "hold":
        hold(a)
    elif a.cmd == "socks":
        socks(a)


if __name__ == "__main__":
    main()
