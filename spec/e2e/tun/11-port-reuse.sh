#!/usr/bin/env bash
# Short connections that the server closes first: the client keeps no
# TIME_WAIT and reuses ports at once, while lwIP still holds the earlier
# connection on that 4-tuple in TIME_WAIT. A new SYN on it must be
# accepted (chute ends the TIME_WAIT pcb), or the rate stalls after a few
# thousand connections. lwIP keeps only the newest 64 TIME_WAIT pcbs (its
# list walks cost 60% of the CPU at high rates otherwise): a 32-port range
# meets them, a 3000-port range meets only trimmed ones.
. "$(dirname "$0")/../netns.sh"
need_root
tun_env_up

port=7301
cat >"$NETNS_TMP/closer.py" <<'PY'
import socket, sys
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((sys.argv[1], int(sys.argv[2])))
ls.listen(4096)
while True:
    c, _ = ls.accept()
    c.send(b"y")
    c.close()
PY
bg_in "$NS_SRV" "$NETNS_TMP/closer.log" "$PY" "$NETNS_TMP/closer.py" "$SRV4" "$port"
wait_tcp "$NS_SRV" "$SRV4" "$port" || fail "the closing server did not start"

cat >"$NETNS_TMP/seq.py" <<'PY'
import socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ok = 0
t0 = time.time()
for i in range(n):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        ok += s.recv(8) == b"y" and s.recv(8) == b""
    except OSError as e:
        print(f"connection {i} failed: {e}")
        break
    finally:
        s.close()
print(f"ok={ok} in {time.time() - t0:.1f}s")
PY

round() { # N FIRST LAST: N connections one after another from ports FIRST..LAST
    cli sysctl -qw net.ipv4.ip_local_port_range="$2 $3"
    check "$1 connections over ports $2-$3, server closing first"
    out=$(cli_py "$SRV4" "$port" "$1" <"$NETNS_TMP/seq.py")
    say "$out"
    assert_match "^ok=$1 in" "$(echo "$out" | tail -1)" "every connection accepted"
    stats_read
    say "tw_reused=$S_tw_reused tw_trimmed=$S_tw_trimmed tcp_total=$S_tcp_total"
}
round 2000 20000 20031
[ "$S_tw_reused" -gt 0 ] || fail "no TIME_WAIT reuse happened: the test did not reach the case"
reused=$S_tw_reused trimmed=$S_tw_trimmed
round 8000 21000 23999
[ "$S_tw_trimmed" -gt $((trimmed + 7000)) ] ||
    fail "TIME_WAIT pcbs were not trimmed: tw_trimmed $trimmed -> $S_tw_trimmed over 8000 connections"
say "a 3000-port range met $((S_tw_reused - reused)) kept TIME_WAIT pcbs"
chute_alive
pass
