#!/usr/bin/env bash
# The HTTP proxy inbound: absolute-URI forwarding (a 100 MiB GET, keep-alive
# across three requests, 20 POSTs and 20 PUTs with 5 MB bodies), a WebSocket
# upgrade forwarded (GET ws://...: its 101, then frames both ways) and a
# CONNECT tunnel (100 MiB).
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start --big
bundle_write <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
chute_start

PROXY="http://127.0.0.1:$HTTP_PORT"
O="http://127.0.0.1:$ORIGIN_PORT"
BIG=104857600

say "plain forwarding: GET $O/big.bin through $PROXY"
got=$(fetch_sha -x "$PROXY" "$O/big.bin")
assert_eq "$SHA_BIG" "$got" "sha256 of 100 MiB via the HTTP proxy equals the file's"
assert_log "tcp http 127\.0\.0\.1:[0-9]+ -> 127\.0\.0\.1:$ORIGIN_PORT policy=DIRECT rule=\"route\"" \
    "flow line for the forwarded GET, DIRECT by route"
down=$(flow_field "$(flow_line "tcp http .* -> 127\.0\.0\.1:$ORIGIN_PORT ")" down)
assert_ge "$BIG" "$down" "the forwarded flow counts >= 100 MiB down (got $down)"

say "keep-alive: one curl, three URLs on one origin, one client connection"
# %{num_connects} is the number of new connections each transfer opened:
# 1 for the first, 0 for each that reused the proxy connection.
connects=$(curl --silent --show-error --fail --max-time 60 -v -x "$PROXY" \
    -w '%{num_connects}\n' \
    -o "$E2E_TMP/ka1" "$O/small" -o "$E2E_TMP/ka2" "$O/1m.bin" -o "$E2E_TMP/ka3" "$O/small" \
    2>"$E2E_TMP/ka.err") || { cat "$E2E_TMP/ka.err" >&2; fail "keep-alive curl failed"; }
assert_eq "1 0 0" "$(echo $connects)" "connections opened per transfer"
assert_eq 2 "$(grep -c 'Re-using existing connection' "$E2E_TMP/ka.err" || true)" \
    "curl -v reports 2 reused connections"
assert_eq "$SHA_SMALL" "$(sha_file "$E2E_TMP/ka1")" "body 1 (/small) is right"
assert_eq "$SHA_1M" "$(sha_file "$E2E_TMP/ka2")" "body 2 (/1m.bin) is right"
assert_eq "$SHA_SMALL" "$(sha_file "$E2E_TMP/ka3")" "body 3 (/small) is right"

# Twenty rounds, not one: a relay that sometimes loses the response to an
# upload (it happened: about one request in twenty hung) fails here reliably.
ROUNDS=20
head -c 5000000 /dev/urandom >"$E2E_TMP/body"
SHA_BODY=$(sha_file "$E2E_TMP/body")

say "POST with a 5 MB body, $ROUNDS times (curl sends Expect: 100-continue for it)"
check "each POST is answered 200 \"posted\" by nginx"
for i in $(seq "$ROUNDS"); do
    resp=$(curl --silent --show-error --max-time 10 -x "$PROXY" --data-binary @"$E2E_TMP/body" \
        -w ' %{http_code}' "$O/post?round=$i") || fail "POST $i of $ROUNDS through the proxy failed"
    [ "$(echo $resp)" = "posted 200" ] || fail "POST $i: expected 'posted 200', got '$resp'"
done
check "nginx's access log shows $ROUNDS POSTs, each with its whole body"
sleep 0.2
n=$(awk '$1 == "POST" && $2 == "/post" && $3 == 200 && $4 >= 5000000' "$E2E_TMP/access.log" | wc -l)
assert_eq "$ROUNDS" "$n" "POSTs that reached the origin with >= 5000000 bytes"

say "PUT a 5 MB file, $ROUNDS times: the bytes nginx stores are the bytes sent"
check "each PUT is answered 201 and stored intact"
for i in $(seq "$ROUNDS"); do
    code=$(curl --silent --show-error --max-time 10 -x "$PROXY" -T "$E2E_TMP/body" -o /dev/null \
        -w '%{http_code}' "$O/upload/put$i.bin") || fail "PUT $i of $ROUNDS through the proxy failed"
    [ "$code" = 201 ] || fail "PUT $i: expected 201, got $code"
    [ "$(sha_file "$WWW/upload/put$i.bin")" = "$SHA_BODY" ] || fail "PUT $i: the stored file differs"
done

say "an upgrade through the forwarding proxy: GET ws://... gets its 101, then frames both ways"
WS_PORT=$(e2e_ports 1) || fail "e2e_ports: no free port"
MITMDIR=$(dirname "$0")/../mitm
python3 "$MITMDIR/ws_echo.py" 127.0.0.1 "$WS_PORT" - - "$E2E_TMP/ws.ready" >"$E2E_TMP/ws.log" 2>&1 &
E2E_EXTRA_PIDS+=($!)
for _ in $(seq 50); do [ -s "$E2E_TMP/ws.ready" ] && break; sleep 0.1; done
[ -s "$E2E_TMP/ws.ready" ] || fail "the WebSocket server did not start: $(cat "$E2E_TMP/ws.log")"
ws=$(python3 "$MITMDIR/ws_client.py" 127.0.0.1 "$HTTP_PORT" "127.0.0.1:$WS_PORT" - \
    "ping through the proxy" "http://127.0.0.1:$WS_PORT/ws") || fail "ws_client.py: $ws"
assert_match "^HTTP/1.1 101" "$ws" "101 Switching Protocols reached the client"
assert_match "^ping through the proxy$" "$ws" "the frame came back through the tunnel"

say "CONNECT tunnel (curl -p): GET $O/big.bin inside it"
got=$(fetch_sha -p -x "$PROXY" "$O/big.bin")
assert_eq "$SHA_BIG" "$got" "sha256 of 100 MiB through a CONNECT tunnel equals the file's"
wait_log_count "tcp http .* -> 127\.0\.0\.1:$ORIGIN_PORT " 2 >/dev/null
n=$(count_flows_down_ge "tcp http .* -> 127\.0\.0\.1:$ORIGIN_PORT policy=DIRECT " $BIG)
assert_ge 2 "$n" "two flows carried >= 100 MiB down (forward and CONNECT)"

e2e_pass
