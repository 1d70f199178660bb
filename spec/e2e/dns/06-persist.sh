#!/usr/bin/env bash
# Fake-IP mappings persist: SIGTERM writes the state file ("address name"
# lines), a restart loads it before the first query and every name gets its
# old address back, new names get addresses nobody holds; lines that are
# garbage or outside the range are skipped (and said so), never fatal.
# A reload (SIGHUP) keeps the mappings whether it keeps the server or
# rebuilds it (fake_ip_ttl changed); a reload whose DNS listener cannot bind
# fails and leaves the running DNS server answering.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/dnslib.bash"

dns_init
upstream_start
write_bundle() { # TTL [LISTEN_PORT]
    bundle_write "  dns = { listen = \"127.0.0.1:${2:-$DNS_PORT}\", upstream = { \"127.0.0.1:$UP_PORT\" },
          state_file = \"$STATE\", fake_ip_ttl = $1 },"
}
write_bundle 5 <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
dns_chute_start

# ask_all NAMES...: "name address" lines
ask_all() {
    local n
    for n in "$@"; do printf '%s %s\n' "$n" "$(dq "$n" A)"; done
}
names=()
for i in $(seq 40); do names+=("p$i.test.example"); done
before=$(ask_all "${names[@]}")
assert_eq 40 "$(awk '{ print $2 }' <<<"$before" | sort -u | grep -c '^198\.1[89]\.')" "40 names, 40 distinct fake IPs"

say "restart"
chute_stop_within 5
check "the state file holds the 40 mappings"
[ -s "$STATE" ] || fail "no state file at $STATE"
assert_eq 40 "$(grep -c -E '^198\.1[89]\.[0-9]+\.[0-9]+ p[0-9]+\.test\.example$' "$STATE")" "40 'address name' lines"
assert_eq "" "$(find "$(dirname "$STATE")" -maxdepth 1 -name "$(basename "$STATE").*")" "no temp file left beside it"
dns_chute_start
dstats R
assert_eq 40 "$R_dns_fake_entries" "after the restart, 40 mappings are loaded before any query"
after=$(ask_all "${names[@]}")
assert_eq "$before" "$after" "every name gets its old address back"
new=$(dq new.test.example A)
check "a new name gets an address none of the restored names holds ($new)"
grep -q -F " $new" <<<"$before" && fail "new.test.example got $new, already p-something's"

say "reload"
kill -HUP "$CHUTE_PID"
assert_log "reloaded .*rule version 2" "SIGHUP with the same bundle: reloaded"
assert_eq "$before" "$(ask_all "${names[@]}")" "a reload that keeps the DNS server keeps the mappings"
write_bundle 9 <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
kill -HUP "$CHUTE_PID"
assert_log "reloaded .*rule version 3" "SIGHUP with fake_ip_ttl = 9: reloaded"
assert_eq 9 "$(dttl "$(dfull p1.test.example A)")" "the new server answers with TTL 9"
assert_eq "$before" "$(ask_all "${names[@]}")" "a reload that rebuilds the DNS server keeps the mappings (through the state file)"
assert_eq "$new" "$(dq new.test.example A)" "and the mapping made since the restart"

say "a reload that cannot bind its DNS listener"
# A port from the registry: one taken by bind(0) on UDP may be in use on
# TCP (a TIME_WAIT, another test's client), and then the holder fails.
busy=$(e2e_ports 1) || fail "e2e_ports: no free port to hold"
python3 - "$E2E_TMP/busy" "$busy" <<'PY' &
import socket, sys, time
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", int(sys.argv[2])))
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
t.bind(("127.0.0.1", int(sys.argv[2])))
t.listen(1)
open(sys.argv[1], "w").write(sys.argv[2])
time.sleep(60)
PY
E2E_EXTRA_PIDS+=("$!")
for _ in $(seq 100); do [ -s "$E2E_TMP/busy" ] && break; sleep 0.05; done
[ -s "$E2E_TMP/busy" ] || fail "no process holds port $busy"
write_bundle 9 "$busy" <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
kill -HUP "$CHUTE_PID"
assert_log "reload failed, keeping the running bundle: .*dns\.listen 127\.0\.0\.1 port $busy" "the reload fails on the busy port"
chute_alive
assert_eq "$(sed -n 1p <<<"$before" | cut -d' ' -f2)" "$(dq p1.test.example A)" "the running DNS server still answers, with its mappings"
write_bundle 9 <<'LUA'
function chute.route(flow) return "DIRECT" end
LUA
chute_stop_within 5

say "a state file with garbage"
{
    echo "198.18.7.7 good.test.example"
    echo "not an address line"
    echo "10.0.0.1 outside.test.example"
    echo "198.18.7.8 bad..name"
    echo ""
    echo "198.18.7.9"
    head -c 300 /dev/urandom | tr -d '\n\0'
    echo
} >"$STATE"
dns_chute_start
assert_log "$(basename "$STATE"): [0-9]+ lines skipped" "skipped lines are reported"
assert_eq 198.18.7.7 "$(dq good.test.example A)" "the good line was loaded"
o=$(dq outside.test.example A)
assert_in_net "$o" 198.18.0.0/15 "a line outside the range is not used: outside.test.example gets a pool address ($o)"
e2e_pass
