#!/usr/bin/env bash
# 100 MiB through the SOCKS5 inbound, by name (chute resolves) and by IP;
# the bytes must be the file's and the flow log must count them.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start --big
bundle_write <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
chute_start

BIG=104857600

say "socks5h: the name 'localhost' travels to chute, which resolves it"
got=$(fetch_sha -x "socks5h://127.0.0.1:$SOCKS_PORT" "http://localhost:$ORIGIN_PORT/big.bin")
assert_eq "$SHA_BIG" "$got" "sha256 of 100 MiB via socks5h equals the file's"

say "socks5: curl resolves, chute gets an IPv4 address"
got=$(fetch_sha -x "socks5://127.0.0.1:$SOCKS_PORT" "http://127.0.0.1:$ORIGIN_PORT/big.bin")
assert_eq "$SHA_BIG" "$got" "sha256 of 100 MiB via socks5 equals the file's"

assert_log "tcp socks 127\.0\.0\.1:[0-9]+ -> localhost:$ORIGIN_PORT policy=DIRECT rule=\"route\"" \
    "flow line for localhost:$ORIGIN_PORT, DIRECT by route"
assert_log "tcp socks 127\.0\.0\.1:[0-9]+ -> 127\.0\.0\.1:$ORIGIN_PORT policy=DIRECT rule=\"route\"" \
    "flow line for 127.0.0.1:$ORIGIN_PORT, DIRECT by route"

down=$(flow_field "$(flow_line "-> localhost:$ORIGIN_PORT ")" down)
assert_ge "$BIG" "$down" "bytes down by name >= 100 MiB (got $down)"
down=$(flow_field "$(flow_line "-> 127\.0\.0\.1:$ORIGIN_PORT ")" down)
assert_ge "$BIG" "$down" "bytes down by IP >= 100 MiB (got $down)"
up=$(flow_field "$(flow_line "-> 127\.0\.0\.1:$ORIGIN_PORT ")" up)
assert_ge 40 "$up" "bytes up counts the request (got $up)"

e2e_pass
