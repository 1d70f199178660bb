#!/usr/bin/env bash
# Half-open and slowloris floods on the SOCKS5 and HTTP listeners and the
# control API (issue 19). Bounds: timeouts.connect = 3 s here; per listener
# INBOUND_HS_PER_SOURCE (256) unfinished handshakes per source and
# INBOUND_HS_MAX (1024) in all; the control API CONTROL_HS_PER_SOURCE
# (256) unfinished clients per source and CONTROL_MAX_CLIENTS (1024) in
# all, a whole first request within 10 s. Over a cap the oldest unfinished
# connection goes (counted), real clients are served throughout, and
# afterwards chute holds no more than 10 descriptors and 8 MiB over its
# baseline. ~50 s.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hostile.bash"

e2e_init
origin_start
CTL_PORT=$(e2e_ports 1) || fail "e2e_ports: no free port for the control API"
SECRET=h0stile
bundle_write "  control = { listen = \"127.0.0.1:$CTL_PORT\", secret = \"$SECRET\" },
  timeouts = { connect = 3, idle = 60 }," <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
# (the second timeouts key wins: Lua tables keep the last one)
chute_start
wait_port 127.0.0.1 "$CTL_PORT" 10 || fail "the control API does not accept"
URL=http://localhost:$ORIGIN_PORT/small

probe() { # probe WHEN: a SOCKS5, an HTTP proxy and a control client are served
    assert_eq 0 "$(curl_rc -x "socks5h://127.0.0.1:$SOCKS_PORT" "$URL")" "$1: a SOCKS5 client is served"
    assert_eq 0 "$(curl_rc -x "http://127.0.0.1:$HTTP_PORT" "$URL")" "$1: an HTTP proxy client is served"
    assert_eq 200 "$(http_status -H "Authorization: Bearer $SECRET" "http://127.0.0.1:$CTL_PORT/version")" \
        "$1: the control API answers"
}
probe "before"
baseline

# closed N FROM TO < json: how many of connections FROM..TO (1-based) the peer closed.
closed() {
    python3 -c 'import json, sys
j = json.load(sys.stdin); a, b = int(sys.argv[1]), int(sys.argv[2])
print(sum(1 for t in j["closed_at"][a - 1:b] if t is not None))' "$1" "$2"
}

say "300 silent connections from 127.0.0.1 on each listener (per-source cap 256)"
for port in "$SOCKS_PORT" "$HTTP_PORT"; do
    rm -f "$E2E_TMP/ready"
    flood hold 127.0.0.1 "$port" 300 --secs 2 --ready "$E2E_TMP/ready" >"$E2E_TMP/hold.json" &
    fl=$!

    wait_file_l "$E2E_TMP/ready" || fail "the flood did not open its connections"
    probe "during the flood on port $port"
    wait "$fl"
    assert_eq 300 "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["opened"])' <"$E2E_TMP/hold.json")" \
        "all 300 connected (the backlog takes them)"
    got=$(closed 1 44 <"$E2E_TMP/hold.json")
    assert_ge 44 "$got" "the 44 oldest were closed to make room ($got)"
    got=$(closed 101 300 <"$E2E_TMP/hold.json")
    # the probes themselves took a few places of the newest ones' source
    check "the newest 200 were kept ($got closed of them, bound 8)"
    [ "$got" -le 8 ] || fail "newer connections were closed before older ones: $got of the newest 200"
done
read -r drops pending < <(stat_of inbound_hs_source_drops inbound_handshakes | xargs)
assert_ge 88 "$drops" "inbound_hs_source_drops counts them ($drops)"

say "1150 silent SOCKS5 connections from 5 sources (global cap 1024)"
rm -f "$E2E_TMP"/ready.*
pids=()
for s in 2 3 4 5 6; do
    flood hold 127.0.0.1 "$SOCKS_PORT" 230 --src "127.0.0.$s" --secs 2.5 --ready "$E2E_TMP/ready.$s" \
        >"$E2E_TMP/hold.$s.json" &
    pids+=($!)
    # the first source's connections are the oldest: the others start once they are all open
    [ "$s" = 2 ] && { wait_file_l "$E2E_TMP/ready.2" || fail "flood from 127.0.0.2 did not start"; }
done
for s in 2 3 4 5 6; do wait_file_l "$E2E_TMP/ready.$s" || fail "flood from 127.0.0.$s did not start"; done
probe "during the global flood"
for p in "${pids[@]}"; do wait "$p"; done
read -r gdrops < <(stat_of inbound_hs_global_drops)
assert_ge 126 "$gdrops" "inbound_hs_global_drops counts the ones over 1024 ($gdrops)"
got=$(closed 1 25 <"$E2E_TMP/hold.2.json")
check "the first source's oldest went first ($got of its first 25 closed)"
[ "$got" -ge 20 ] || fail "global cap: the oldest were not the ones closed ($got of 25)"

say "slowloris: 20 SOCKS5 and 20 HTTP clients sending a byte every 0.5 s"
flood hold 127.0.0.1 "$SOCKS_PORT" 20 --trickle "$(printf '050100050100031e%s' "$(printf 'a%.0s' $(seq 30) | xxd -p)")" \
    --interval 0.5 --secs 7 >"$E2E_TMP/slow-socks.json" &
s1=$!
flood hold 127.0.0.1 "$HTTP_PORT" 20 --trickle "$(printf 'GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\nX-Slow: yes\r\n' | xxd -p | tr -d '\n')" \
    --interval 0.5 --secs 7 >"$E2E_TMP/slow-http.json" &
s2=$!
sleep 1
probe "during the slowloris"
wait "$s1" "$s2"
for f in slow-socks slow-http; do
    python3 - "$E2E_TMP/$f.json" <<'PY' || fail "$f: a trickling client outlived the 3 s handshake deadline"
import json, sys
j = json.load(open(sys.argv[1]))
t = j["closed_at"]
print("%s: %d open, closed after %s s" % (sys.argv[1].rsplit("/", 1)[1], j["opened"], sorted(set(t))))
sys.exit(0 if j["opened"] == 20 and all(x is not None and 2.5 <= x <= 5 for x in t) else 1)
PY
    check "$f: every trickler closed 2.5-5 s after it connected"
done
read -r tos < <(stat_of inbound_hs_timeouts)
assert_ge 40 "$tos" "inbound_hs_timeouts counts them ($tos)"

say "the control API: 100 silent clients from 127.0.0.3, then 1100 from 127.0.0.2"
# 127.0.0.2 is held to CONTROL_HS_PER_SOURCE (256) of its own, oldest out
# first, so the global cap (1024) is never reached and 127.0.0.3's older
# connections stay until the 10 s deadline: one source cannot starve
# another. (With only the global cap, 127.0.0.3's 100 went first.)
rm -f "$E2E_TMP"/ready.*
flood hold 127.0.0.1 "$CTL_PORT" 100 --src 127.0.0.3 --secs 12 --ready "$E2E_TMP/ready.b" >"$E2E_TMP/ctl-b.json" &
fb=$!
wait_file_l "$E2E_TMP/ready.b" || fail "the control flood from 127.0.0.3 did not open its connections"
flood hold 127.0.0.1 "$CTL_PORT" 1100 --src 127.0.0.2 --secs 12 --ready "$E2E_TMP/ready.a" >"$E2E_TMP/ctl-a.json" &
fa=$!
# 1100 connections, each accepted (and 844 closed) by chute: seconds under ASan
wait_file_l "$E2E_TMP/ready.a" 30 || fail "the control flood from 127.0.0.2 did not open its connections"
probe "during the control flood"
wait "$fa" "$fb"
python3 - "$E2E_TMP/ctl-a.json" "$E2E_TMP/ctl-b.json" <<'PY' || fail "control: the per-source cap did not hold"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
ta, tb = a["closed_at"], b["closed_at"]
early = lambda t: sum(1 for x in t if x is not None and x < 9)
late = [x for x in ta + tb if x is None or x > 12]
span = lambda t: "%s-%s s" % (min(t, key=lambda x: x or 99), max(t, key=lambda x: x or 0))
print("control: 127.0.0.2: %d open, %d of its oldest 844 closed early (its cap), %d of its newest 256"
      " (closed after %s); 127.0.0.3: %d open, %d closed early (closed after %s); %d left after 12 s" % (
          a["opened"], early(ta[:844]), early(ta[844:]), span(ta[844:]), b["opened"], early(tb),
          span(tb), len(late)))
ok = a["opened"] == 1100 and b["opened"] == 100 and early(ta[:844]) >= 840
ok = ok and early(ta[844:]) <= 8 and early(tb) == 0 and not late
sys.exit(0 if ok else 1)
PY
check "control: the flooding source lost its own oldest, the other source kept all, the rest went at 10 s"
body=$(curl --silent -H "Authorization: Bearer $SECRET" "http://127.0.0.1:$CTL_PORT/chute/stats")
assert_match '"hs_timeouts": ?[1-9][0-9]*' "$body" "GET /chute counts the control deadline"
assert_match '"source_drops": ?(8[4-9][0-9]|9[0-9][0-9]|[1-9][0-9]{3})' "$body" "GET /chute counts the per-source drops"
metrics=$(curl --silent -H "Authorization: Bearer $SECRET" "http://127.0.0.1:$CTL_PORT/metrics")
assert_match 'chute_control_source_drops [1-9]' "$metrics" "/metrics has chute_control_source_drops"
assert_eq 1 "$(log_count 'control: too many unfinished clients from one source')" \
    "one log line for the per-source cap, not one per drop"

probe "after"
sleep 1
read -r pending < <(stat_of inbound_handshakes)
assert_eq 0 "$pending" "no handshake left unfinished (inbound_handshakes)"
assert_no_leak 8 10
chute_stop_within 5
e2e_pass
