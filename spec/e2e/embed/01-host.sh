#!/usr/bin/env bash
# examples/embed/host: chute embedded through its API, the host owning the
# TUN (no offload) and protecting the sockets. A GET, a 64 MiB download
# sha256-checked, 50 parallel GETs, UDP echo, stats from the packet path,
# and a clean stop.
. "$(dirname "$0")/../netns.sh"
. "$(dirname "$0")/host.bash"
need_root
embed_env_up http udp
assert_routed_via_tun "$SRV4"

check "GET /small through the host returns the file"
body=$(cli_curl --fail --max-time 10 "http://$SRV4/small") || fail "curl /small failed"
assert_eq "hello from the tun e2e server" "$body" "the small body"
assert_log "flow [0-9]+ tcp tun 198\.19\.0\.1:[0-9]+ -> $SRV4:$HTTP_PORT policy=DIRECT $RULE_RE up=[0-9]+ down=[0-9]+ .*close=done" \
    "the GET is a DIRECT flow from the packet interface that closed normally"
assert_log "tun: the host moves the packets|chute .* running" "the engine runs without its own device"

big_file 64
t0=$(now)
got=$(cli_fetch_sha --max-time 120 "http://$SRV4/big.bin")
secs=$(elapsed "$t0")
say "64 MiB through the host in ${secs}s ($(awk -v s="$secs" 'BEGIN { printf "%.0f", 512 / s }') Mbit/s)"
assert_eq "$SHA_BIG" "$got" "the 64 MiB download's sha256"

check "50 parallel GETs all return the file"
pids=()
for i in $(seq 50); do
    cli_curl --fail --max-time 30 -o "$NETNS_TMP/p$i" "http://$SRV4/small" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a parallel GET failed"; done
for i in $(seq 50); do
    assert_eq "hello from the tun e2e server" "$(cat "$NETNS_TMP/p$i")" "parallel body $i"
done

check "UDP echo through the host"
reply=$(cli "$PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)
s.sendto(b"ping-embed", (sys.argv[1], int(sys.argv[2])))
print(s.recv(100).decode())' "$SRV4" "$ECHO_PORT") || fail "no UDP echo"
assert_eq "ping-embed" "$reply" "the echoed datagram"

stats_read
say "stats: pkts_in=$S_pkts_in pkts_out=$S_pkts_out batches=$S_batches host_full=${S_host_full:-?} gso_in=$S_gso_in"
assert_ge $((64 * 1024 * 1024 / 1500)) "$S_pkts_out" "the download left through packets_out"
assert_eq 0 "$S_gso_in" "no offloaded packets on the host's path"

chute_stop_within 5
pass
