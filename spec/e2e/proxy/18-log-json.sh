#!/usr/bin/env bash
# log_format = "json" with log_file: every line is one JSON object that
# python's json module parses, with time, level, event and msg, and the
# flow close line's fields; a SOCKS5 host name holding a newline, a
# control byte and " policy=REJECT" stays inside one line and forges no
# field. SIGUSR2 reopens the file after logrotate moved it. The control
# API's /logs keeps streaming the text messages. `chute run --log-format
# json` turns a text bundle's stderr into JSON lines.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start
read -r CTL_PORT <<<"$(e2e_ports 1)"
LOGDIR=$E2E_TMP/logs
mkdir -p "$LOGDIR"
JLOG=$LOGDIR/chute.json
bundle_write "  log_format = \"json\", log_file = \"$JLOG\",
  control = { listen = \"127.0.0.1:$CTL_PORT\" }," <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
chute_start
wait_port 127.0.0.1 "$CTL_PORT" 10 || fail "the control API does not accept"
O="http://127.0.0.1:$ORIGIN_PORT"

# jsonl_check FILE PYTHON: every line of FILE parses as one object with the
# line's four fields; then PYTHON runs with |lines| (the objects) and may
# call fail(msg).
jsonl_check() {
    python3 - "$1" "$TEST_NAME" "$2" <<'PY'
import json, sys
path, name, body = sys.argv[1], sys.argv[2], sys.argv[3]
def fail(m):
    print(f"{name}: FAIL: {m}", file=sys.stderr, flush=True); sys.exit(1)
lines = []
with open(path, "rb") as f:
    for i, raw in enumerate(f, 1):
        try:
            o = json.loads(raw)
        except ValueError as e:
            fail(f"{path}:{i} is not JSON ({e}): {raw[:300]!r}")
        if not isinstance(o, dict):
            fail(f"{path}:{i} is not an object")
        for k, t in (("time", str), ("level", str), ("event", str), ("msg", str)):
            if not isinstance(o.get(k), t):
                fail(f"{path}:{i} has no {k} string: {raw[:300]!r}")
        lines.append(o)
if not lines:
    fail(f"{path} is empty")
exec(body)
PY
}

say "a /logs stream runs while the traffic below goes"
curl -s -N --max-time 6 "http://127.0.0.1:$CTL_PORT/logs" >"$E2E_TMP/tap.out" &
TAP=$!
sleep 0.5

say "traffic: curl over SOCKS5 and HTTP, and a hostile SOCKS5 host name"
got=$(fetch_sha --socks5-hostname "127.0.0.1:$SOCKS_PORT" "$O/1m.bin")
assert_eq "$SHA_1M" "$got" "1 MiB over SOCKS5"
got=$(fetch_sha -x "http://127.0.0.1:$HTTP_PORT" "$O/small")
assert_eq "$SHA_SMALL" "$got" "small over the HTTP proxy"
python3 - "$SOCKS_PORT" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"\x05\x01\x00")
assert s.recv(2) == b"\x05\x00"
host = b"evil\ninjected\x01 policy=REJECT"
s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host + b"\x00\x50")
s.recv(64)
s.close()
PY
kill -USR1 "$CHUTE_PID"
wait_log_json() { # PATTERN [FILE]: until a line of FILE (default $JLOG) matches
    for _ in $(seq 100); do
        grep -q -E -- "$1" "${2:-$JLOG}" 2>/dev/null && return 0
        sleep 0.05
    done
    fail "no line of ${2:-$JLOG} matches /$1/"
}
wait_log_json '"event":"stats"'
wait_log_json 'evil\\u000ainjected\\u0001 policy=REJECT.*"reason"'
check "stderr got nothing: the log went to log_file"
[ ! -s "$CHUTE_LOG" ] || fail "stderr has: $(head -3 "$CHUTE_LOG")"

check "every line of $JLOG parses; the flows' fields are there"
jsonl_check "$JLOG" '
closes = [o for o in lines if o["event"] == "flow" and "reason" in o]
if len(closes) != 3:
    fail(f"{len(closes)} flow close lines, want 3: {closes}")
big = [o for o in closes if o["inbound"] == "socks" and o["down"] >= 1048576]
if len(big) != 1:
    fail(f"no socks flow close with down >= 1 MiB: {closes}")
o = big[0]
for k, t in (("flow", int), ("up", int), ("down", int), ("duration", float), ("policy", str),
             ("rule", str), ("src", str), ("dst", str), ("network", str), ("reason", str)):
    if not isinstance(o.get(k), t):
        fail(f"the close line has no {k} of type {t.__name__}: {o}")
if (o["policy"], o["rule"], o["reason"], o["network"]) != ("DIRECT", "route", "done", "tcp"):
    fail(f"fields: {o}")
want = "flow %d tcp socks " % o["flow"]
if not o["msg"].startswith(want):
    fail("msg is not the text line: " + o["msg"])
if not any(c["inbound"] == "http" for c in closes):
    fail("no http flow close")
evil = [c for c in closes if "evil" in c["dst"]]
if len(evil) != 1 or evil[0]["dst"] != "evil\ninjected\x01 policy=REJECT:80":
    fail(f"the hostile name is not one dst value: {evil}")
if evil[0]["policy"] != "DIRECT":
    fail(f"the hostile name changed the policy field: {evil[0]}")
stats = [o for o in lines if o["event"] == "stats" and "flows_total" in o]
if not stats or not isinstance(stats[0]["flows_total"], int) or stats[0]["flows_total"] < 3:
    fail(f"no stats line with flows_total >= 3: {stats[:1]}")
if not all(o["level"] in ("error", "warn", "info", "debug") for o in lines):
    fail("a level outside error/warn/info/debug")
'
check "/logs streamed the text messages meanwhile"
wait "$TAP" || true
grep -q '"payload":"flow [0-9]* tcp socks 127.0.0.1:[0-9]* -> 127.0.0.1:'"$ORIGIN_PORT"' ' "$E2E_TMP/tap.out" ||
    fail "/logs has no flow line: $(head -c 400 "$E2E_TMP/tap.out")"
grep -q 'evil\\\\ninjected\\\\x01' "$E2E_TMP/tap.out" ||
    fail "/logs does not carry the hostile name escaped as in the text log: $(grep evil "$E2E_TMP/tap.out" | head -c 300)"

say "logrotate: mv the file, SIGUSR2, new lines go to a new file at the path"
mv "$JLOG" "$JLOG.1"
kill -USR2 "$CHUTE_PID"
wait_log_json '"msg":"log: reopened on SIGUSR2"'
got=$(fetch_sha --socks5-hostname "127.0.0.1:$SOCKS_PORT" "$O/small")
assert_eq "$SHA_SMALL" "$got" "a request after the rotation"
wait_log_json '"event":"flow".*"reason":"done"'
check "the rotated file got no line after the move"
if grep -q 'reopened on SIGUSR2' "$JLOG.1"; then fail "the old file got the reopen line"; fi
jsonl_check "$JLOG" '
if not [o for o in lines if o["event"] == "flow" and o.get("reason") == "done"]:
    fail("no flow close in the new file")
'
jsonl_check "$JLOG.1" 'pass'
check "a log_file in a missing folder fails the reload with its path and keeps logging"
bundle_write "  log_format = \"json\", log_file = \"$E2E_TMP/nowhere/x.log\"," <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
kill -HUP "$CHUTE_PID"
wait_log_json "log_file $E2E_TMP/nowhere/x.log: No such file or directory \\(make the folder first\\)"
e2e_pass

say "chute run --log-format json: a text bundle's stderr in JSON"
bundle_write <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
check "--log-format bogus is refused with exit 2"
rc=0; "$CHUTE" run --log-format bogus "$BUNDLE" 2>"$E2E_TMP/bogus.err" || rc=$?
assert_eq 2 "$rc" "exit status"
grep -q "expected text or json" "$E2E_TMP/bogus.err" || fail "the error: $(cat "$E2E_TMP/bogus.err")"
CHUTE_LOG=$E2E_TMP/stderr.json
"$CHUTE" run --log-format json "$BUNDLE" 2>"$CHUTE_LOG" &
CHUTE_PID=$!
wait_port 127.0.0.1 "$HTTP_PORT" 10 || { chute_alive; fail "the HTTP listener does not accept"; }
got=$(fetch_sha -x "http://127.0.0.1:$HTTP_PORT" "$O/small")
assert_eq "$SHA_SMALL" "$got" "small over the HTTP proxy"
wait_log_json '"reason":"done"' "$CHUTE_LOG"
chute_stop_within 5
check "every stderr line parses"
jsonl_check "$CHUTE_LOG" '
if not [o for o in lines if o["event"] == "stopped"]:
    fail("no stopped line")
'
say "pass"
