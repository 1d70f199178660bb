#!/usr/bin/env bash
# TCP timestamps on the TUN side. lwIP answers a SYN that offers them (as
# Linux's do), so the client's TIME_WAIT entries carry them, and with
# net.ipv4.tcp_tw_reuse = 1 connect() may take such a port again at once.
# Without them a host opening connections fast to one destination stalled
# in connect()'s search for a free port once about half its range was in
# TIME_WAIT (~100 ms every few hundred connections: scripts/bench/tun's
# client-closes rate was 0.34 of the veth's). Each data segment's payload leaves room for the
# option: with offload the kernel cuts chute's 64 KiB segments at
# gso_size, which must be the MTU less the headers *with* options.
# Without offload the download's segments go through the writer thread
# (the TSan part runs this test too).
. "$(dirname "$0")/../netns.sh"
need_root
netns_setup

port=7302
cat >"$NETNS_TMP/server.py" <<'PY'
import socket, sys, threading
# Sends N bytes (N from the client's first line), then waits for the
# client to close first, then closes: the TIME_WAIT stays with the client.
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((sys.argv[1], int(sys.argv[2])))
ls.listen(64)
def serve(c):
    with c:
        n = int(c.makefile("rb").readline())
        c.sendall(bytes(i % 251 for i in range(n)))
        while c.recv(65536):
            pass
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
bg_in "$NS_SRV" "$NETNS_TMP/server.log" "$PY" "$NETNS_TMP/server.py" "$SRV4" "$port"
wait_tcp "$NS_SRV" "$SRV4" "$port" || fail "the server did not start"

cat >"$NETNS_TMP/client.py" <<'PY'
import socket, struct, sys, time
host, port, n, lport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def fetch():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", lport))
    s.settimeout(10)
    s.connect((host, port))
    s.sendall(b"%d\n" % n)
    got = bytearray()
    while len(got) < n:
        d = s.recv(1 << 20)
        if not d:
            break
        got += d
    ti = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    s.close()  # first: the TIME_WAIT is ours
    # struct tcp_info: u8 state, ca_state, retransmits, probes, backoff,
    # options, wscale, flags; u32 rto, ato, snd_mss, rcv_mss, ...
    options, rcv_mss = ti[5], struct.unpack_from("I", ti, 20)[0]
    return got == bytes(i % 251 for i in range(n)), options & 1, rcv_mss
ok, ts, mss = fetch()
print(f"first ok={int(ok)} ts={ts} rcv_mss={mss}")
# tcp_tw_reuse takes a TIME_WAIT port whose last timestamp is over 1 s old.
time.sleep(1.5)
try:
    ok2 = fetch()[0]
    print(f"again ok={int(ok2)}")
except OSError as e:
    print(f"again failed: {e}")
PY

run() { # LPORT: one fetch from client port LPORT, then again from the same port
    local out
    cli sysctl -qw net.ipv4.tcp_tw_reuse=1
    out=$(cli_py "$SRV4" "$port" 4000000 "$1" <"$NETNS_TMP/client.py") || fail "the client failed: $out"
    say "$out"
    assert_match "^first ok=1 " "$out" "4 MB arrived whole and in order"
    assert_match " ts=1 " "$out" "the client's connection has timestamps"
    assert_match " rcv_mss=1448$" "$(head -1 <<<"$out")" \
        "segments are MTU 1500 less 20 (IP), 20 (TCP) and 12 (timestamps): 1448 bytes"
    assert_match "^again ok=1" "$(tail -1 <<<"$out")" \
        "connect() from the port in TIME_WAIT succeeded (tcp_tw_reuse needs the timestamps)"
}

for off in true false; do
    TUN_EXTRA="offload = $off"
    tun_bundle <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
    [ -n "${CHUTE_PID:-}" ] && { kill "$CHUTE_PID"; wait "$CHUTE_PID" 2>/dev/null || true; }
    tun_chute_start
    assert_routed_via_tun "$SRV4"
    check "offload $off: a download, then a new connection from the same port"
    run $((30000 + RANDOM % 20000))
    stats_read
    if [ "$off" = true ]; then
        [ "$S_gso_out" -gt 0 ] || fail "offload on: no offloaded packet was written (gso_out=0)"
    else
        assert_eq 0 "$S_gso_out" "offload off: gso_out"
        assert_log "tun $TUN_DEV: up, .*offload off \\(writer thread\\)" "offload off: the writer thread runs"
        # Most of these went out through the writer thread (core/tun/writer.c):
        # its counts must be in the stats. 8 MB down is >= 5,525 segments.
        assert_ge 1 "$S_wq_handoffs" "offload off: flushes handed to the writer thread"
        assert_ge 5525 "$S_pkts_out" "offload off: packets written (the writer's counted)"
        assert_ge 8000000 "$S_bytes_out" "offload off: bytes written"
    fi
    chute_alive
done
pass
