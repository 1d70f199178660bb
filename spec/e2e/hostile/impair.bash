# A bad link between the client namespace and the servers, on top of
# spec/e2e/netns.sh (source after it, call after netns_setup and before
# servers_start): the servers' veth moves into a middle namespace $NS_MID,
# a new veth joins $NS_MID to $NS_SRV (same addresses as before), and
# impair.py bridges the two there, dropping and delaying frames.
#
#   impair_link LOSS_PCT JITTER_MS   the link; IMPAIR_PID is the bridge
#   impair_blackout on|off           drop every IP frame, or stop
#   impair_stats                     the bridge's counts, one line

NS_MID="cht$$m"

impair_link() {
    ip netns del "$NS_MID" 2>/dev/null || true
    ip netns add "$NS_MID" || fail "ip netns add $NS_MID"
    NETNS_MADE+=("$NS_MID")
    ip -n "$NS_SRV" link set veth1 netns "$NS_MID" || fail "moving veth1 into $NS_MID"
    ip -n "$NS_MID" link add mid1 type veth peer name veth1 netns "$NS_SRV" || fail "veth mid1"
    ip -n "$NS_SRV" addr add "$SRV4/24" dev veth1
    ip -n "$NS_SRV" addr add "$SRV6/64" dev veth1 nodad
    local l
    for l in "$NS_MID veth1" "$NS_MID mid1" "$NS_SRV veth1" "$NS_MID lo"; do
        ip -n "${l% *}" link set "${l#* }" up
    done
    # impair.py moves MTU-sized frames: no GSO from the two senders.
    ip -n "$NS_CLI" link set veth0 gso_max_segs 1
    ip -n "$NS_SRV" link set veth1 gso_max_segs 1
    bg_in "$NS_MID" "$NETNS_TMP/impair.log" "$PY" "$(dirname "${BASH_SOURCE[0]}")/impair.py" \
        veth1 mid1 "$NETNS_TMP/impair.ready" --loss "$1" --jitter "$2" --seed "$$"
    IMPAIR_PID=$BG_PID
    wait_file "$NETNS_TMP/impair.ready" 10 || fail "impair.py did not start: $(tail -n 3 "$NETNS_TMP/impair.log")"
    local i
    for i in $(seq 100); do
        ip -n "$NS_SRV" -o link show dev veth1 | grep -q 'state UP' && break
        sleep 0.05
    done
    say "link $NS_CLI <-> $NS_SRV through $NS_MID: ${1}% loss both ways, 0-${2} ms jitter toward the client"
}

impair_blackout() {
    if [ "$1" = on ]; then kill -USR1 "$IMPAIR_PID"; else kill -USR2 "$IMPAIR_PID"; fi
}

impair_stats() {
    kill -USR2 "$IMPAIR_PID" 2>/dev/null # prints (and ends any blackout)
    sleep 0.2
    grep frames= "$NETNS_TMP/impair.log" | tail -n 1
}
