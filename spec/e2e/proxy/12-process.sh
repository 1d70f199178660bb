#!/usr/bin/env bash
# flow.process_name / process_path / uid: the local process behind a
# client's socket, looked up only when the script reads them. curl is
# rejected by name; python3 passes; the uid is the caller's.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start
bundle_write <<'LUA'
function chute.route(flow)
  chute.log("info", ("process %s %s uid=%s"):format(tostring(flow.process_name),
    tostring(flow.process_path), tostring(flow.uid)))
  if flow.process_name == "curl" then return "REJECT" end
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

chute_stop_within 5
e2e_pass
