#!/usr/bin/env python3
"""Broken peers for spec/e2e/hostile/03-faults (loopback).

faultpeer.py MODE ADDR PORT READY_FILE
  hole    TCP: accepts and never answers (a proxy that hangs)
  junk    TCP: reads the request, answers 512 random bytes, closes
  reset   TCP: an HTTP origin that promises 1 MB (Content-Length), sends
          200 KB, then resets the connection (SO_LINGER 0)
  slow    TCP: an HTTP origin that sends 10 MB at 256 KB/s
  dnsjunk UDP: answers every query with a wrong ID, then random bytes
  dnsself UDP: answers every A query with 127.0.0.1 (a name that resolves here)
  dnsslow UDP: answers A queries with 127.0.0.2 after a delay set by the
          name's first label: under-* 0.6 s, over-*/flood-* 2.5 s, dead-*
          never, anything else at once (spec/e2e/hostile/09-dns-slow)
  dnsfast UDP: the same with 127.0.0.3 and no delays (dead-* never)
"""
import os, socket, struct, sys, threading, time

mode, addr, port, ready = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


def serve_tcp(handle):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(128)
    open(ready, "w").write("ready\n")
    held = []
    while True:
        c, _ = ls.accept()
        threading.Thread(target=handle, args=(c, held), daemon=True).start()


def hole(c, held):
    held.append(c)  # kept open, never read, never answered


def junk(c, held):
    try:
        c.settimeout(5)
        c.recv(4096)
        c.sendall(os.urandom(512))
    except OSError:
        pass
    c.close()


def reset(c, held):
    try:
        c.settimeout(5)
        buf = b""
        while b"\r\n\r\n" not in buf:
            b = c.recv(4096)
            if not b:
                return
            buf += b
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + os.urandom(200000))
        time.sleep(0.2)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    c.close()


def slow(c, held):
    try:
        c.settimeout(30)
        buf = b""
        while b"\r\n\r\n" not in buf:
            b = c.recv(4096)
            if not b:
                return
            buf += b
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10000000\r\n\r\n")
        chunk = os.urandom(16384)
        for _ in range(10000000 // 16384):
            c.sendall(chunk)
            time.sleep(16384 / 262144)
    except OSError:
        pass
    c.close()


def dnsjunk():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    open(ready, "w").write("ready\n")
    while True:
        q, peer = s.recvfrom(4096)
        if len(q) < 12:
            continue
        wrong = struct.pack("!H", (struct.unpack("!H", q[:2])[0] + 1) & 0xFFFF)
        s.sendto(wrong + q[2:], peer)        # an answer to another query
        s.sendto(os.urandom(64), peer)       # noise
        s.sendto(q[:2] + b"\x81\x80" + os.urandom(30), peer)  # right ID, garbage after


def dnsself():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    open(ready, "w").write("ready\n")
    while True:
        q, peer = s.recvfrom(4096)
        if len(q) < 17:
            continue
        end = q.index(b"\0", 12) + 5  # the question: name, type, class
        qtype = struct.unpack("!H", q[end - 4:end - 2])[0]
        an = struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton("127.0.0.1")
        n = 1 if qtype == 1 else 0
        s.sendto(q[:2] + struct.pack("!HHHHH", 0x8180, 1, n, 0, 0) + q[12:end] +
                 (b"\xc0\x0c" + an if n else b""), peer)


def dnsdelayed(answer_ip, delays):
    import heapq
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.bind((addr, port))
    open(ready, "w").write("ready\n")
    due = []  # (when, seq, datagram, peer)
    seq = 0
    while True:
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, d, peer = heapq.heappop(due)
            s.sendto(d, peer)
        s.settimeout(max(0.001, due[0][0] - now) if due else None)
        try:
            q, peer = s.recvfrom(4096)
        except socket.timeout:
            continue
        if len(q) < 17 or 0 not in q[12:]:
            continue
        end = q.index(b"\0", 12) + 5
        label = q[13:13 + q[12]].decode("ascii", "replace").lower()
        kind = label.split("-")[0] if "-" in label else ""
        if kind == "dead":
            continue
        qtype = struct.unpack("!H", q[end - 4:end - 2])[0]
        an = struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(answer_ip)
        n = 1 if qtype == 1 else 0
        d = (q[:2] + struct.pack("!HHHHH", 0x8180, 1, n, 0, 0) + q[12:end] +
             (b"\xc0\x0c" + an if n else b""))
        seq += 1
        heapq.heappush(due, (time.monotonic() + delays.get(kind, 0.0), seq, d, peer))


if mode == "dnsslow":
    dnsdelayed("127.0.0.2", {"under": 0.6, "over": 2.5, "flood": 2.5})
elif mode == "dnsfast":
    dnsdelayed("127.0.0.3", {})
elif mode == "dnsjunk":
    dnsjunk()
elif mode == "dnsself":
    dnsself()
else:
    serve_tcp({"hole": hole, "junk": junk, "reset": reset, "slow": slow}[mode])
