#!/usr/bin/env bash
# 1,000 concurrent bulk flows through the TUN: every one completes with the
# exact bytes, nothing lost, and lwIP's heap stays inside its 16 MiB budget
# (above 3/4 of it the engine pauses upstream reads and window updates).
. "$(dirname "$0")/../netns.sh"
need_root
tun_env_up http

check "1000 concurrent GETs of 1 MiB, all open at once"
out=$(ulimit -n 8192; cli_py "$SRV4" "$HTTP_PORT" "$SHA_1M" <<'PY'
import asyncio, hashlib, sys, time
host, port, want = sys.argv[1], int(sys.argv[2]), sys.argv[3]
N = 1000
opened = asyncio.Event()
count = 0

async def one():
    global count
    r, w = await asyncio.open_connection(host, port)
    count += 1
    if count == N:
        opened.set()
    await opened.wait()  # every connection is open before any request goes out
    w.write(b"GET /1m.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = await r.read()
    w.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return hashlib.sha256(body).hexdigest() == want

async def main():
    t0 = time.time()
    res = await asyncio.wait_for(asyncio.gather(*(one() for _ in range(N))), 240)
    print(f"ok={sum(res)} of {N} in {time.time() - t0:.1f}s")

asyncio.run(main())
PY
)
say "$out"
assert_match "^ok=1000 of 1000 in" "$out" "every flow got the exact 1 MiB"
stats_read
say "heap_max=$S_heap_max mem_pauses=$S_mem_pauses rx_drops=$S_rx_drops tcp_total=$S_tcp_total"
[ "$S_heap_max" -le 16777216 ] || fail "lwIP heap peaked at $S_heap_max, over 16 MiB"
assert_eq 1000 "$(grep -c 'close=done' "$CHUTE_LOG")" "1000 flows closed as done"
chute_alive
pass
