#!/usr/bin/env bash
# IPv6: an origin on [::1] reached through SOCKS5 with an IPv6 literal (and
# through the HTTP proxy), then a SOCKS5 listener on [::1] itself.
. "$(dirname "$0")/../lib.sh"

have_ipv6_loopback || skip "this machine has no ::1"
e2e_init
origin_start
bundle_write <<'LUA'
function chute.route(flow)
  if flow.dst_ip == "::1" then
    return "DIRECT"
  end
  return "REJECT" -- so a lookup that lost the v6 address cannot pass by accident
end
LUA
chute_start
URL="http://[::1]:$ORIGIN_PORT"

say "curl -x socks5://127.0.0.1:$SOCKS_PORT $URL/small (ATYP 4 request)"
got=$(fetch_sha -x "socks5://127.0.0.1:$SOCKS_PORT" "$URL/small")
assert_eq "$SHA_SMALL" "$got" "the small file over IPv6"
got=$(fetch_sha -x "socks5://127.0.0.1:$SOCKS_PORT" "$URL/1m.bin")
assert_eq "$SHA_1M" "$got" "the 1 MiB file over IPv6"
assert_log "tcp socks 127\.0\.0\.1:[0-9]+ -> \[::1\]:$ORIGIN_PORT policy=DIRECT rule=\"route\"" \
    "flow line: -> [::1]:$ORIGIN_PORT, DIRECT by route (route() saw dst_ip ::1)"
sleep 0.2
assert_eq 2 "$(grep -c '^GET /\(small\|1m.bin\) 200 .* srv=::1$' "$E2E_TMP/access.log")" \
    "nginx answered both GETs on its ::1 socket"

say "restart chute with its SOCKS5 listener on [::1]:$SOCKS_PORT"
chute_stop_within 2
# shellcheck disable=SC2034 # read by bundle_config in lib.sh
SOCKS_LISTEN="[::1]:$SOCKS_PORT"
bundle_write <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
chute_start
got=$(fetch_sha -x "socks5://[::1]:$SOCKS_PORT" "$URL/1m.bin")
assert_eq "$SHA_1M" "$got" "client -> [::1] listener -> [::1] origin"
assert_log "tcp socks \[::1\]:[0-9]+ -> \[::1\]:$ORIGIN_PORT policy=DIRECT" \
    "flow line shows an IPv6 client address"

say "curl -x http://127.0.0.1:$HTTP_PORT $URL/small (HTTP proxy, IPv6 literal in the URI)"
got=$(fetch_sha -x "http://127.0.0.1:$HTTP_PORT" "$URL/small")
assert_eq "$SHA_SMALL" "$got" "the small file over IPv6 through the HTTP proxy"
assert_log "tcp http .* -> \[::1\]:$ORIGIN_PORT policy=DIRECT" "flow line for the HTTP proxy"
e2e_pass
