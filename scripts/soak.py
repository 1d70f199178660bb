#!/usr/bin/env python3
"""Load, sampling, plot and verdict for scripts/soak (run by it, not by hand).

  soak.py short SOCKS|- HOST PORT PATH SHA SECS   many short HTTP/1.0 fetches
                                                 (through SOCKS5 HOST:PORT, or
                                                 straight, i.e. through the TUN)
  soak.py udp HOST PORT SECS                     new 5-tuples of echoed datagrams
  soak.py dns SERVER SECS                        random names, A queries
  soak.py sample PID CONTROL_URL SECS CSV        one row a second
  soak.py judge CSV LIVE_MIB SLOPE_MIB RSS_MIB FDS HEAP_KIB
                                                 exit 1 on growth past the
                                                 bounds (after a warm-up of a
                                                 third of the run, 60 s at least)
  soak.py plot CSV PNG

Each load mode prints one JSON line when its time is up: ok, bad (a body
or an echo that came back wrong: a failure), errors (connect or timeout).
"""
import hashlib, json, os, random, socket, struct, sys, time, urllib.request


def result(**kw):
    print(json.dumps(kw), flush=True)


def socks_connect(proxy, host, port):
    ph, pp = proxy.rsplit(":", 1)
    s = socket.create_connection((ph, int(pp)), timeout=10)
    s.sendall(b"\x05\x01\x00")
    if s.recv(2) != b"\x05\x00":
        raise OSError("socks greeting")
    s.sendall(b"\x05\x01\x00\x01" + socket.inet_aton(host) + struct.pack("!H", port))
    rep = b""
    while len(rep) < 10:
        b = s.recv(10 - len(rep))
        if not b:
            raise OSError("socks reply")
        rep += b
    if rep[1] != 0:
        raise OSError("socks rep %d" % rep[1])
    return s


def short(proxy, host, port, path, sha, secs):
    ok = bad = err = 0
    end = time.time() + secs
    while time.time() < end:
        try:
            if proxy != "-":
                s = socks_connect(proxy, host, port)
            else:
                s = socket.create_connection((host, port), timeout=10)
            s.settimeout(10)
            s.sendall(b"GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (path.encode(), host.encode()))
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
            s.close()
            body = data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in data else b""
            if hashlib.sha256(body).hexdigest() == sha:
                ok += 1
            else:
                bad += 1
        except OSError:
            err += 1
            time.sleep(0.05)
    result(mode="short", via=proxy, ok=ok, bad=bad, errors=err)


def udp(host, port, secs):
    ok = bad = err = 0
    end = time.time() + secs
    while time.time() < end:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # a new source port: a new flow
        s.settimeout(1)
        try:
            for _ in range(3):
                msg = os.urandom(random.randint(1, 1400))
                s.sendto(msg, (host, port))
                got, _ = s.recvfrom(2048)
                if got == msg:
                    ok += 1
                else:
                    bad += 1
        except OSError:
            err += 1
        s.close()
        time.sleep(0.005)
    result(mode="udp", ok=ok, bad=bad, errors=err)


def dns(server, secs):
    ok = bad = err = 0
    end = time.time() + secs
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    while time.time() < end:
        qid = random.randrange(65536)
        name = "n%08x.soak.example" % random.randrange(1 << 32)
        q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
        q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
        q += struct.pack("!HH", 1, 1)
        try:
            s.sendto(q, (server, 53))
            a, _ = s.recvfrom(4096)
            if len(a) >= 12 and struct.unpack("!H", a[:2])[0] == qid and len(a) <= 512:
                ok += 1
            else:
                bad += 1
        except OSError:
            err += 1
        time.sleep(0.002)
    result(mode="dns", ok=ok, bad=bad, errors=err)


def proc_rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def sample(pid, url, secs, csv):
    start = time.time()
    with open(csv, "w") as f:
        f.write("t,rss_kib,fds,heap_used,flows_active,udp_active,tcp_active,lua_bytes,dns_fake_entries,malloc_in_use,malloc_free\n")
        while time.time() - start < secs:
            t0 = time.time()
            try:
                c = json.load(urllib.request.urlopen(url, timeout=2))["counters"]
                fds = len(os.listdir("/proc/%d/fd" % pid))
                f.write("%.1f,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d\n" % (
                    t0 - start, proc_rss_kib(pid), fds, c.get("heap_used", 0), c.get("flows_active", 0),
                    c.get("udp_active", 0), c.get("tcp_active", 0), c.get("lua_bytes", 0),
                    c.get("dns_fake_entries", 0), c.get("malloc_in_use", 0), c.get("malloc_free", 0)))
                f.flush()
            except (OSError, ValueError, KeyError):
                if not os.path.exists("/proc/%d" % pid):
                    sys.exit("chute (pid %d) is gone" % pid)
            time.sleep(max(0, 1 - (time.time() - t0)))


def rows(csv):
    lines = open(csv).read().split("\n")
    head = lines[0].split(",")
    return head, [dict(zip(head, map(float, l.split(",")))) for l in lines[1:] if l]


WARMUP = 60  # seconds at least: UDP flows live timeouts.udp (30 s), pools and caches fill


def slope(r, key):
    """Least-squares slope of |key| over t, per minute."""
    n = len(r)
    mt = sum(x["t"] for x in r) / n
    my = sum(x[key] for x in r) / n
    den = sum((x["t"] - mt) ** 2 for x in r)
    return 60 * sum((x["t"] - mt) * (x[key] - my) for x in r) / den if den else 0.0


def trend(r, key):
    """Least squares of |key| = a + b t + c flows_active: b per minute (the
    growth the live flows do not explain) and c (bytes per live flow)."""
    n = len(r)
    mt = sum(x["t"] for x in r) / n
    mf = sum(x["flows_active"] for x in r) / n
    my = sum(x[key] for x in r) / n
    stt = sum((x["t"] - mt) ** 2 for x in r)
    sff = sum((x["flows_active"] - mf) ** 2 for x in r)
    stf = sum((x["t"] - mt) * (x["flows_active"] - mf) for x in r)
    sty = sum((x["t"] - mt) * (x[key] - my) for x in r)
    sfy = sum((x["flows_active"] - mf) * (x[key] - my) for x in r)
    d = stt * sff - stf * stf
    if not d:
        return slope(r, key), 0.0
    return 60 * (sty * sff - sfy * stf) / d, (sfy * stt - sty * stf) / d


def window(r):
    """The warm-up's length and the samples judged after it."""
    warm = max(WARMUP, r[-1]["t"] / 3)
    return warm, [x for x in r if x["t"] >= warm]


# RSS follows the heap's high-water mark, which rises with each new peak
# of concurrent flows for the first minutes (0.3-0.5 MiB/min over 2-minute
# windows early in a clean 30-minute run): a window shorter than this is
# held to SHORT_RSS_SLOPE instead of the stated bound. Live bytes have no
# such lag and keep their bound at any length.
LONG_WINDOW = 400  # seconds
SHORT_RSS_SLOPE = 0.75  # MiB/min


def judge(csv, live_mib, slope_mib, rss_mib, fds_bound, heap_kib):
    """Growth is judged after a warm-up of a third of the run (60 s at
    least), as least-squares slopes in MiB/min (a leak or a creeping heap
    shows as one, whatever the run's length): malloc's live bytes beyond
    what the live flows hold (a leak), and RSS (a leak, or the allocator
    keeping more and more touched pages); and the last third of that window
    against its first (a step past the bound: RSS, descriptors beyond the
    live flows', lwIP's heap)."""
    _, r = rows(csv)
    if not r:
        sys.exit("soak: no samples in %s" % csv)
    peak = max(r, key=lambda x: x["rss_kib"])
    warm, w = window(r)
    if len(w) < 30:
        sys.exit("soak: only %d samples after the %d s warm-up" % (len(w), warm))
    fails = []
    if w[0].get("malloc_in_use"):
        # lwIP's packet buffers come from malloc too: bytes in flight, which
        # follow the traffic (a 3-minute run's rose 0.12 MiB/min, all of it
        # heap_used), judged by the heap's own bound below, not as a leak.
        for x in w:
            x["live"] = x["malloc_in_use"] - x["heap_used"]
        b, per_flow = trend(w, "live")
        line = "live bytes (lwIP's packet data aside): %.1f MiB at the warm-up's end, peak %.1f MiB, %.0f B per live flow; growth beyond the flows %+.3f MiB/min (bound %.2f)" % (
            w[0]["live"] / (1 << 20), max(x["live"] for x in w) / (1 << 20),
            per_flow, b / (1 << 20), live_mib)
        print("soak: " + line)
        if b / (1 << 20) > live_mib:
            fails.append(line)
    else:
        print("soak: no malloc_in_use in the samples (an older chute?): live bytes not judged")
    s = slope(w, "rss_kib") / 1024
    bound = slope_mib if w[-1]["t"] - w[0]["t"] >= LONG_WINDOW else max(slope_mib, SHORT_RSS_SLOPE)
    line = "rss: peak %.1f MiB at %d s; %.1f MiB at the warm-up's end (%d s); slope %+.3f MiB/min over %d..%d s (bound %.2f%s)" % (
        peak["rss_kib"] / 1024, peak["t"], w[0]["rss_kib"] / 1024, warm, s, w[0]["t"], w[-1]["t"], bound,
        "" if bound == slope_mib else ", a window under %d s" % LONG_WINDOW)
    print("soak: " + line)
    if s > bound:
        fails.append(line)
    n = len(w) // 3
    first, last = w[:n], w[-n:]
    # Descriptors follow the live flows (a UDP flow holds a socket): what
    # must not grow is the ones beyond them.
    for x in w:
        x["fds_beyond_flows"] = x["fds"] - x["flows_active"]
    for key, bound, unit, scale in (("rss_kib", rss_mib * 1024, "MiB", 1024),
                                    ("fds_beyond_flows", fds_bound, "", 1),
                                    ("heap_used", heap_kib * 1024, "KiB", 1024)):
        a = max(x[key] for x in first)
        b = max(x[key] for x in last)
        line = "%s: first third's max %.1f%s, last third's max %.1f%s (bound +%s)" % (
            key, a / scale, unit, b / scale, unit, bound / scale if scale > 1 else bound)
        print("soak: " + line)
        if b > a + bound:
            fails.append(line)
    if fails:
        sys.exit("soak: FAIL: growth past the bound: " + "; ".join(fails))


def plot(csv, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    _, r = rows(csv)
    t = [x["t"] / 60 for x in r]
    fig, ax = plt.subplots(4, 1, figsize=(10, 10), sharex=True)
    ax[0].plot(t, [x["rss_kib"] / 1024 for x in r], label="RSS")
    # What malloc hands out: RSS far above it is retention, not live bytes.
    if "malloc_in_use" in r[0]:
        ax[0].plot(t, [x["malloc_in_use"] / (1 << 20) for x in r], label="malloc in use")
    ax[0].set_ylabel("MiB")
    warm, w = window(r)
    if len(w) > 1:  # the judged window and its least-squares line
        s, my = slope(w, "rss_kib") / 1024, sum(x["rss_kib"] for x in w) / len(w) / 1024
        mt = sum(x["t"] for x in w) / len(w) / 60
        ends = [w[0]["t"] / 60, w[-1]["t"] / 60]
        ax[0].plot(ends, [my + s * (e - mt) for e in ends], "r--", label="%+.3f MiB/min" % s)
        ax[0].axvline(warm / 60, color="grey", linestyle=":")
        ax[0].legend(loc="lower right")
    ax[1].plot(t, [x["fds"] for x in r]); ax[1].set_ylabel("open fds")
    ax[2].plot(t, [x["heap_used"] / 1024 for x in r]); ax[2].set_ylabel("lwIP heap KiB")
    ax[3].plot(t, [x["flows_active"] for x in r], label="flows")
    ax[3].plot(t, [x["udp_active"] for x in r], label="udp")
    ax[3].plot(t, [x["tcp_active"] for x in r], label="tcp (tun)")
    ax[3].legend(); ax[3].set_ylabel("active"); ax[3].set_xlabel("minutes")
    fig.suptitle("chute soak: " + os.path.basename(csv))
    fig.tight_layout()
    fig.savefig(png, dpi=80)


def main():
    a = sys.argv[1:]
    if a[0] == "short":
        short(a[1], a[2], int(a[3]), a[4], a[5], float(a[6]))
    elif a[0] == "udp":
        udp(a[1], int(a[2]), float(a[3]))
    elif a[0] == "dns":
        dns(a[1], float(a[2]))
    elif a[0] == "sample":
        sample(int(a[1]), a[2], float(a[3]), a[4])
    elif a[0] == "judge":
        judge(a[1], *map(float, a[2:7]))
    elif a[0] == "plot":
        plot(a[1], a[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
