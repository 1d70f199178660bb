#!/usr/bin/env bash
# flow.process_name / process_path / uid: the local process behind a
# client's socket, looked up only when the script reads them. curl is
# rejected by name; python3 passes; the uid is the caller's. A copy of curl
# with a long name is known by its whole name (not the 15-byte comm), and a
# list's PROCESS-NAME matches it case-insensitively, as mihomo does.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start
printf 'PROCESS-NAME,curl-with-a-long-name\n' >"$BUNDLE/procs.list"
bundle_write <<'LUA'
local procs = chute.ruleset "procs.list"
function chute.route(flow)
  chute.log("info", ("process %s %s uid=%s"):format(tostring(flow.process_name),
    tostring(flow.process_path), tostring(flow.uid)))
  if flow.process_name == "curl" then return "REJECT" end
  if procs:match(flow) then return "REJECT" end
  return "DIRECT"
end
LUA
chute_start

SOCKS="socks5h://127.0.0.1:$SOCKS_PORT"

say "curl through SOCKS5: rejected by its process name"
rc=0
curl --silent --max-time 10 -o /dev/null -x "$SOCKS" "http://localhost:$ORIGIN_PORT/small" || rc=$?
assert_eq 97 "$rc" "curl is rejected (SOCKS5 reply 2)"
assert_log "process curl $(command -v curl) uid=$(id -u)" "route() saw curl's name, path and uid"

say "python3 through SOCKS5: passes and gets the file"
got=$(python3 - "$SOCKS_PORT" "$ORIGIN_PORT" <<'PY'
import hashlib, socket, sys
sp, op = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", sp))
s.sendall(b"\x05\x01\x00")
assert s.recv(2) == b"\x05\x00"
s.sendall(b"\x05\x01\x00\x01\x7f\x00\x00\x01" + op.to_bytes(2, "big"))
assert s.recv(10)[1] == 0
s.sendall(b"GET /small HTTP/1.0\r\nHost: x\r\n\r\n")
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
print(hashlib.sha256(data.split(b"\r\n\r\n", 1)[1]).hexdigest())
PY
)
assert_eq "$SHA_SMALL" "$got" "python3's download through SOCKS5"
assert_log "process python3[^ ]* /[^ ]*python3[^ ]* uid=$(id -u)" "route() saw python3"
assert_log "tcp socks .* policy=DIRECT rule=\"route\"" "python3's flow went DIRECT"

say "a copy of curl named Curl-With-A-Long-Name: its whole name, matched case-insensitively"
cp "$(command -v curl)" "$E2E_TMP/Curl-With-A-Long-Name"
rc=0
"$E2E_TMP/Curl-With-A-Long-Name" --silent --max-time 10 -o /dev/null -x "$SOCKS" \
    "http://localhost:$ORIGIN_PORT/small" || rc=$?
assert_eq 97 "$rc" "the copy is rejected by the list's PROCESS-NAME"
assert_log "process Curl-With-A-Long-Name $E2E_TMP/Curl-With-A-Long-Name uid=" \
    "route() saw the whole name, not the comm 'Curl-With-A-Lo'"
assert_log "policy=REJECT rule=\"route procs.list:1\"" "the list's line 1 decided"

chute_stop_within 5
e2e_pass
