#!/usr/bin/env python3
"""A lossy, jittery link for tests on kernels without sch_netem.

   impair.py IF_A IF_B READY [--loss PCT] [--jitter MS] [--seed N]

Bridges Ethernet frames between IF_A (toward the client) and IF_B (toward
the servers) over AF_PACKET, in a namespace of its own. Every IPv4/IPv6
frame is dropped with probability --loss (both directions); frames from
IF_B to IF_A are also held for a uniform random 0..--jitter ms, which
reorders them the way `tc netem delay 0 300ms` does. ARP and neighbour
discovery pass untouched so the link comes up deterministically. The
senders must not hand over GSO frames bigger than the MTU (the harness sets
gso_max_segs 1 on their veths). A veth's TCP/UDP frames carry a partial
checksum (offloaded to a device that never computes it), and a frame sent
again from a packet socket is checked by the receiver: each is completed
here.

SIGUSR1 toggles a blackout (every IP frame dropped), SIGUSR2 ends it; the
counts go to stdout on SIGTERM and SIGUSR1/2 as one line:
  frames=N dropped=N held=N blackout=0|1
"""
import array
import heapq
import os
import random
import select
import signal
import socket
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
IP_TYPES = (b"\x08\x00", b"\x86\xdd")


def csum(data):
    """RFC 1071 sum in native byte order (stored back the same way)."""
    if len(data) % 2:
        data += b"\0"
    t = sum(array.array("H", data))
    while t >> 16:
        t = (t & 0xFFFF) + (t >> 16)
    return ~t & 0xFFFF


def fix_l4(frame):
    """The frame with its TCP or UDP checksum computed (IPv4, IPv6 without
    extension headers); other frames as they are."""
    et = frame[12:14]
    if et == b"\x08\x00":
        ihl = (frame[14] & 15) * 4
        if frame[20] & 0x3F or frame[21]:  # a fragment: leave it
            return frame
        proto, end = frame[23], 14 + int.from_bytes(frame[16:18], "big")
        start, pseudo_addr = 14 + ihl, frame[26:34]
        pseudo_tail = b"\0" + bytes([proto]) + (end - start).to_bytes(2, "big")
    elif et == b"\x86\xdd":
        proto, start = frame[20], 54
        end = start + int.from_bytes(frame[18:20], "big")
        pseudo_addr = frame[22:54]
        pseudo_tail = (end - start).to_bytes(4, "big") + b"\0\0\0" + bytes([proto])
    else:
        return frame
    off = {6: 16, 17: 6}.get(proto)
    if off is None or end > len(frame) or end - start < off + 2:
        return frame
    f = bytearray(frame)
    f[start + off:start + off + 2] = b"\0\0"
    c = csum(pseudo_addr + pseudo_tail + bytes(f[start:end]))
    if proto == 17 and c == 0:
        c = 0xFFFF
    f[start + off:start + off + 2] = array.array("H", [c]).tobytes()
    return bytes(f)


def main():
    args = sys.argv[1:]
    opts = {"--loss": 0.0, "--jitter": 0.0, "--seed": 1.0}
    pos = []
    while args:
        a = args.pop(0)
        if a in opts:
            opts[a] = float(args.pop(0))
        else:
            pos.append(a)
    if len(pos) != 3:
        sys.exit(__doc__)
    if_a, if_b, ready = pos
    rnd = random.Random(int(opts["--seed"]))
    loss, jitter = opts["--loss"] / 100.0, opts["--jitter"] / 1000.0

    socks = {}
    for name in (if_a, if_b):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((name, 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.setblocking(False)
        socks[name] = s
    peer = {if_a: socks[if_b], if_b: socks[if_a]}
    st = {"frames": 0, "dropped": 0, "held": 0, "blackout": 0}
    held = []  # (due, seq, sock, frame)
    seq = 0

    def report(*_):
        print(" ".join(f"{k}={v}" for k, v in st.items()), flush=True)

    def blackout(on):
        def h(*_):
            st["blackout"] = on
            report()
        return h

    signal.signal(signal.SIGUSR1, blackout(1))
    signal.signal(signal.SIGUSR2, blackout(0))
    signal.signal(signal.SIGTERM, lambda *_: (report(), os._exit(0)))
    with open(ready, "w") as f:
        f.write("ready\n")

    fds = {s.fileno(): name for name, s in socks.items()}
    while True:
        now = time.monotonic()
        while held and held[0][0] <= now:
            _, _, out, frame = heapq.heappop(held)
            try:
                out.send(frame)
            except OSError:
                st["dropped"] += 1
        timeout = max(0.0, held[0][0] - now) if held else 1.0
        try:
            ready_fds, _, _ = select.select(list(fds), [], [], timeout)
        except InterruptedError:
            continue
        for fd in ready_fds:
            name = fds[fd]
            for _ in range(64):
                try:
                    frame, addr = socks[name].recvfrom(65536)
                except (BlockingIOError, InterruptedError):
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue  # our own sends, seen again on this socket
                st["frames"] += 1
                ip = frame[12:14] in IP_TYPES
                if ip and (st["blackout"] or rnd.random() < loss):
                    st["dropped"] += 1
                    continue
                if ip:
                    frame = fix_l4(frame)
                if ip and name == if_b and jitter > 0:
                    seq += 1
                    st["held"] += 1
                    heapq.heappush(held, (time.monotonic() + rnd.uniform(0, jitter), seq, peer[name], frame))
                    continue
                try:
                    peer[name].send(frame)
                except OSError:
                    st["dropped"] += 1


if __name__ == "__main__":
    main()
