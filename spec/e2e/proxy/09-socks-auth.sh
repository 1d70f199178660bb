#!/usr/bin/env bash
# SOCKS5 with username/password (RFC 1929): the right credentials pass;
# a wrong password and a client offering no authentication are refused;
# after 5 wrong passwords a source is backed off (1 s, doubling), another
# source is not.
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

say "guessing: after 5 wrong passwords from 127.0.0.2, its attempts are refused unchecked"
# 127.0.0.1 failed 3 times above (under the 5 free ones). From 127.0.0.2:
# two more wrong ones (5 in all) start a 1 s back-off, in which even the
# right password is refused; another source is not affected; after the
# back-off the right password works and clears the count.
guess() { # guess SRC PASS: the RFC 1929 status byte (hex), or "closed"
    python3 - "$SOCKS_PORT" "$1" "$2" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5, source_address=(sys.argv[2], 0))
s.sendall(b"\x05\x01\x02")
s.recv(2)
p = sys.argv[3].encode()
s.sendall(b"\x01\x05alice" + bytes([len(p)]) + p)
r = s.recv(2)
print(r[1:2].hex() if len(r) == 2 else "closed")
PY
}
for i in 1 2 3 4 5; do
    assert_eq 01 "$(guess 127.0.0.2 "wrong$i")" "127.0.0.2: wrong password $i refused"
done
assert_eq 01 "$(guess 127.0.0.2 secret)" "127.0.0.2 backed off: the right password is refused too"
assert_eq 00 "$(guess 127.0.0.3 secret)" "another source (127.0.0.3) is not held back"
assert_log "socks: 5 wrong credentials from ::ffff:127.0.0.2: its attempts are refused unchecked" \
    "log: the back-off, with the source"
sleep 1.2
assert_eq 00 "$(guess 127.0.0.2 secret)" "after the 1 s back-off the right password works"
assert_eq 01 "$(guess 127.0.0.2 wrong6)" "and the count starts over (a wrong one is checked, refused)"
assert_eq 00 "$(guess 127.0.0.2 secret)" "... not backed off after one failure"
kill -USR1 "$CHUTE_PID"
wait_log 'inbound_auth_backoffs=1( |$)' 5 || fail "inbound_auth_backoffs does not count the refused attempt"
check "inbound_auth_backoffs=1 in the stats line"
e2e_pass
