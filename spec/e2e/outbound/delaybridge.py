# delay_link_start (outlib.bash): a two-port L2 bridge in user space that
# holds every frame back: frames from port A go out of port B DELAY_AB
# seconds later, and the other way round DELAY_BA. It stands in for tc netem where the kernel has none.
# PACKET_VNET_HDR keeps GSO and checksum offload: a 64 KiB TSO frame goes
# through as one, with its virtio header, and the kernel segments it on
# the way out.
import collections, select, socket, sys, time
# Usage: delaybridge.py IF_A IF_B DELAY_AB DELAY_BA READY_FILE
a_if, b_if, d_ab, d_ba, ready = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
PACKET_VNET_HDR, PACKET_OUTGOING = 15, 4

def port(name):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.setsockopt(263, PACKET_VNET_HDR, 1)  # SOL_PACKET
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((name, 0))
    s.setblocking(False)
    return s

a, b = port(a_if), port(b_if)
out = {a: (b, d_ab, collections.deque()), b: (a, d_ba, collections.deque())}
open(ready, "w").write("ready\n")
while True:
    now = time.monotonic()
    due = [q[0][0] for _, _, q in out.values() if q]
    timeout = max(0.0, min(due) - now) if due else None
    r, _, _ = select.select([a, b], [], [], timeout)
    now = time.monotonic()
    for s in r:
        dst, delay, q = out[s]
        while True:
            try:
                data, addr = s.recvfrom(70000)
            except BlockingIOError:
                break
            if addr[2] != PACKET_OUTGOING:
                q.append((now + delay, data))
    for s, (dst, delay, q) in out.items():
        while q and q[0][0] <= now:
            try:
                dst.send(q.popleft()[1])
            except OSError:
                pass
