#!/usr/bin/env bash
# 1 GiB each way through examples/embed/host (the packet API, MTU 1500, no
# offload): an upload to a sink in the server namespace that answers with
# the sha256 of what it got, and a download from nginx; both digests equal
# the file's, both flow lines carry every byte, and the packets went
# through chute_engine_packets_in / packets_out one MTU at a time.
. "$(dirname "$0")/../netns.sh"
. "$(dirname "$0")/host.bash"
need_root
SINK_PORT=9000
embed_env_up http

# The sink: per connection, every byte into sha256 until the client's FIN,
# then the hex digest back and close.
cat >"$NETNS_TMP/sink.py" <<'PY'
import hashlib, socket, sys, threading
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
open(sys.argv[3], "w").write("ready\n")
def serve(c):
    h, n = hashlib.sha256(), 0
    buf = bytearray(1 << 20)
    while True:
        k = c.recv_into(buf)
        if k == 0:
            break
        h.update(memoryview(buf)[:k])
        n += k
    c.sendall(f"{n} {h.hexdigest()}\n".encode())
    c.close()
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
bg_in "$NS_SRV" "$NETNS_TMP/sink.log" "$PY" "$NETNS_TMP/sink.py" "$SRV4" "$SINK_PORT" "$NETNS_TMP/sink.ready"
wait_file "$NETNS_TMP/sink.ready" 10 || fail "the sha256 sink did not start"

say "making the 1 GiB file in $WWW"
big_file 1024

check "1 GiB upload through the host: the sink's sha256 equals the file's"
t0=$(now)
got=$(cli_py "$SRV4" "$SINK_PORT" "$WWW/big.bin" <<'PY'
import os, socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=120)
with open(sys.argv[3], "rb") as f:
    s.sendfile(f)
s.shutdown(socket.SHUT_WR)
print(s.makefile().readline().strip())
PY
) || fail "the upload client failed: $got"
secs=$(elapsed "$t0")
say "1 GiB up through the host in ${secs}s ($(awk -v s="$secs" 'BEGIN { printf "%.0f", 8192 / s }') Mbit/s)"
assert_eq "$BIG_SIZE $SHA_BIG" "$got" "the sink's byte count and sha256"

check "1 GiB download through the host: sha256 equal"
t0=$(now)
got=$(cli_fetch_sha --max-time 150 "http://$SRV4/big.bin")
secs=$(elapsed "$t0")
say "1 GiB down through the host in ${secs}s ($(awk -v s="$secs" 'BEGIN { printf "%.0f", 8192 / s }') Mbit/s)"
assert_eq "$SHA_BIG" "$got" "the download's sha256"

check "the flow lines carry every byte, both closed normally"
wait_log "-> $SRV4:$HTTP_PORT .* down=[0-9]{10,} " 10 || fail "no flow line with a 10-digit down= for the download"
up=$(flow_lines "-> $SRV4:$SINK_PORT ")
assert_eq 1 "$(grep -c . <<<"$up")" "one flow to the sink"
assert_ge "$BIG_SIZE" "$(flow_field "$up" up)" "the upload flow's up="
assert_eq done "$(flow_field "$up" close)" "the upload flow's close="
assert_eq 1 "$(flows_down_ge "-> $SRV4:$HTTP_PORT " "$BIG_SIZE" 1)" "flows with down >= $BIG_SIZE"

stats_read
say "stats: pkts_in=$S_pkts_in pkts_out=$S_pkts_out batches=$S_batches host_full=${S_host_full:-?} gso_in=$S_gso_in"
assert_ge $((BIG_SIZE / 1500)) "$S_pkts_in" "the upload came in through packets_in"
assert_ge $((BIG_SIZE / 1500)) "$S_pkts_out" "the download left through packets_out"
assert_eq 0 "$S_gso_in" "no offloaded packets on the host's path"

chute_stop_within 5
pass
