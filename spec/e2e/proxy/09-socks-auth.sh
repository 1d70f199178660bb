#!/usr/bin/env bash
# SOCKS5 with username/password (RFC 1929): the right credentials pass;
# a wrong password and a client offering no authentication are refused.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start
# shellcheck disable=SC2034 # read by bundle_config in lib.sh
SOCKS_USERS='{ alice = "secret" }'
bundle_write <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
chute_start
URL="http://localhost:$ORIGIN_PORT/1m.bin"

say "alice:secret"
got=$(fetch_sha -x "socks5h://alice:secret@127.0.0.1:$SOCKS_PORT" "$URL")
assert_eq "$SHA_1M" "$got" "download with the right credentials"
assert_log "tcp socks .* -> localhost:$ORIGIN_PORT policy=DIRECT rule=\"route\"" "flow line for it"

say "alice:wrong"
rc=$(curl_rc -x "socks5h://alice:wrong@127.0.0.1:$SOCKS_PORT" "$URL")
assert_eq 97 "$rc" "wrong password: curl exit 97 (the proxy refused)"
assert_log " info  socks5: authentication failed \(user 'alice'\)" "log: authentication failed for alice"

say "mallory:secret"
rc=$(curl_rc -x "socks5h://mallory:secret@127.0.0.1:$SOCKS_PORT" "$URL")
assert_eq 97 "$rc" "unknown user: curl exit 97"
assert_log "authentication failed \(user 'mallory'\)" "log: authentication failed for mallory"

say "no credentials: the client offers only 'no authentication'"
rc=$(curl_rc -x "socks5h://127.0.0.1:$SOCKS_PORT" "$URL")
assert_eq 97 "$rc" "no-auth attempt: curl exit 97"
check "raw greeting offering only no-auth gets method 0xFF"
reply=$(python3 - "$SOCKS_PORT" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"\x05\x01\x00")
out = b""
while True:
    b = s.recv(16)
    if not b:
        break
    out += b
print(out.hex())
PY
)
assert_eq "05ff" "$reply" "method selection reply, then close"

check "raw RFC 1929 exchange with a wrong password: status 1, then close"
reply=$(python3 - "$SOCKS_PORT" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"\x05\x01\x02")      # offers username/password only
out = s.recv(2)
s.sendall(b"\x01\x05alice\x05wrong")
while True:
    b = s.recv(16)
    if not b:
        break
    out += b
print(out.hex())
PY
)
assert_eq "05020101" "$reply" "method 0x02 chosen, then auth status 0x01 and close"

say "the refused attempts opened no flows"
assert_eq 1 "$(log_count 'flow [0-9]+ tcp ')" "one flow line (the authenticated download)"
e2e_pass
