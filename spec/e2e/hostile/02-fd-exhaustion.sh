#!/usr/bin/env bash
# Out of descriptors on every listener at once (issue 19; proxy/15-emfile
# holds one listener once): chute's limit lowered to 128, then 3 rounds of
# 1200 connections spread over SOCKS5, HTTP and the control API. Each
# listener pauses 100 ms at a time (no busy loop: at most 30 ticks of CPU
# per 2.5 s while out of descriptors, in every round, not just the first),
# says so once per episode (and at most once per 10 s), and serves new
# clients once the floods end (with the limit still 128); afterwards at most 10 descriptors and 8 MiB over the baseline. ~30 s.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hostile.bash"

need_cmd prlimit
e2e_init
origin_start
CTL_PORT=$(e2e_ports 1) || fail "e2e_ports: no free port for the control API"
bundle_write "  control = { listen = \"127.0.0.1:$CTL_PORT\" }," <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
chute_start
wait_port 127.0.0.1 "$CTL_PORT" 10 || fail "the control API does not accept"
URL=http://localhost:$ORIGIN_PORT/small
served() {
    assert_eq 0 "$(curl_rc -x "socks5h://127.0.0.1:$SOCKS_PORT" "$URL")" "$1: a SOCKS5 client is served"
    assert_eq 0 "$(curl_rc -x "http://127.0.0.1:$HTTP_PORT" "$URL")" "$1: an HTTP proxy client is served"
    assert_eq 200 "$(http_status "http://127.0.0.1:$CTL_PORT/version")" "$1: the control API answers"
}
served "before"
baseline
prlimit --pid "$CHUTE_PID" --nofile=128:128

cpu() { awk '{ print $14 + $15 }' "/proc/$CHUTE_PID/stat"; } # utime + stime, ticks
for round in 1 2 3; do
    say "round $round: 500 + 500 + 200 connections, held 3 s"
    pids=()
    # (the control API's backlog is 128: more would wait in SYN retries)
    for pn in "$SOCKS_PORT 500" "$HTTP_PORT 500" "$CTL_PORT 200"; do
        read -r port n <<<"$pn"
        flood hold 127.0.0.1 "$port" "$n" --secs 3 --connect-timeout 0.2 >/dev/null &
        pids+=($!)
    done
    sleep 0.5
    before=$(cpu)
    sleep 2.5
    ticks=$(($(cpu) - before))
    check "round $round: $ticks ticks of CPU in 2.5 s while out of descriptors (bound 30)"
    [ "$ticks" -le 30 ] || fail "busy loop on EMFILE in round $round: $ticks ticks in 2.5 s"
    for p in "${pids[@]}"; do wait "$p"; done
    sleep 0.5
done
for what in "accept on socks" "accept on http" "control: accept"; do
    n=$(log_count "$what: Too many open files")
    check "'$what' logged at most once per 10 s ($n, bound 2)"
    [ "$n" -ge 1 ] && [ "$n" -le 2 ] || fail "'$what: Too many open files' logged $n times"
done
served "after"
assert_log "accept on socks: resumed after [0-9]+ pauses" "the SOCKS5 listener says it resumed"
assert_log "control: accept resumed after [0-9]+ pauses" "the control API says it resumed"
assert_no_leak 8 10
chute_stop_within 5
e2e_pass
