#!/usr/bin/env bash
# HTTP through the TUN: a small GET, then a 1 GiB download whose sha256
# must equal the file's, and whose flow line shows every byte went down;
# iperf3 both ways for a rate figure (the run, not the number, is checked).
. "$(dirname "$0")/../netns.sh"
need_root
tun_env_up http iperf
assert_routed_via_tun "$SRV4"

check "GET /small through the TUN returns the file"
body=$(cli_curl --fail --max-time 10 "http://$SRV4/small") || fail "curl /small failed"
assert_eq "hello from the tun e2e server" "$body" "the small body"
assert_log "flow [0-9]+ tcp tun 198\.19\.0\.1:[0-9]+ -> $SRV4:$HTTP_PORT policy=DIRECT $RULE_RE up=[0-9]+ down=[0-9]+ .*close=done" \
    "chute logged the GET as a DIRECT tun flow that closed normally"

say "making the 1 GiB file in $WWW"
t0=$(now)
big_file 1024
say "made it in $(elapsed "$t0")s"

t0=$(now)
got=$(cli_fetch_sha --max-time 150 "http://$SRV4/big.bin")
secs=$(elapsed "$t0")
say "1 GiB through the TUN in ${secs}s ($(awk -v s="$secs" 'BEGIN { printf "%.0f", 8192 / s }') Mbit/s)"
assert_eq "$SHA_BIG" "$got" "the 1 GiB download's sha256"

# With offload (the default) lwIP's 64 KiB segments are sent from the
# chunks the download was read into; MTU-sized ones copy (netstack/txbuf.c).
if [[ ${TUN_EXTRA:-} != *"offload = false"* ]] && [ -z "${CHUTE_VIA_HOST:-}" ]; then
    check "the download was read into lwIP's chunks, not copied into its pbufs"
    stats_read
    say "tx_nocopy=$S_tx_nocopy of $BIG_SIZE bytes, heap_used=$S_heap_used"
    # All but the first reads (a download is known by its first large write).
    [ "$S_tx_nocopy" -ge $((BIG_SIZE / 100 * 99)) ] ||
        fail "tx_nocopy=$S_tx_nocopy: the no-copy path did not carry 99% of the download"
fi

check "the download's flow line shows down >= 1 GiB"
wait_log "-> $SRV4:$HTTP_PORT .* down=[0-9]{10,} " 10 || fail "no flow line with a 10-digit down= for the download"
assert_eq 1 "$(flows_down_ge "-> $SRV4:$HTTP_PORT " "$BIG_SIZE" 1)" "flows with down >= $BIG_SIZE"
line=$(flow_lines "-> $SRV4:$HTTP_PORT " | awk -v m="$BIG_SIZE" '{ d = $0; sub(/.* down=/, "", d); sub(/ .*/, "", d); if (d + 0 >= m) print }')
assert_eq "done" "$(flow_field "$line" close)" "the download's flow closed normally"
assert_eq DIRECT "$(flow_field "$line" policy)" "the download's policy"

check "iperf3 through the TUN, upload and download (-R), 1 s each"
for dir in "" -R; do
    stats_read
    rx0=$S_rx_nocopy
    out=$(cli iperf3 -c "$SRV4" -p "$IPERF_PORT" -t 1 -J $dir 2>&1) || fail "iperf3 $dir failed: $(tail -c 600 <<<"$out")"
    read -r bps bytes < <(python3 -c 'import json,sys; s=json.load(sys.stdin)["end"]["sum_received"]; print(int(s["bits_per_second"]), int(s["bytes"]))' <<<"$out") ||
        fail "iperf3 $dir: no result in its JSON"
    assert_ge 1000000 "$bps" "iperf3 ${dir:-upload} moved more than 1 Mbit/s"
    say "iperf3 ${dir:-upload}: $((bps / 1000000)) Mbit/s"
    # With offload the upload's packets (up to 64 KiB) are lwIP's pbufs
    # where the TUN read them (netstack/rxbuf.c): no copy.
    if [ -z "$dir" ] && [[ ${TUN_EXTRA:-} != *"offload = false"* ]] && [ -z "${CHUTE_VIA_HOST:-}" ]; then
        stats_read
        say "rx_nocopy +$((S_rx_nocopy - rx0)) of $bytes bytes uploaded"
        [ $((S_rx_nocopy - rx0)) -ge $((bytes / 10 * 9)) ] ||
            fail "rx_nocopy +$((S_rx_nocopy - rx0)): the upload was copied out of the TUN's buffers"
    fi
done

stats_read
say "stats: pkts_in=$S_pkts_in batches=$S_batches batch_mean=$S_batch_mean heap_max=$S_heap_max wq_drops=$S_wq_drops rx_drops=$S_rx_drops"
assert_decided_once
chute_alive
pass
