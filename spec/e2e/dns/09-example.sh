#!/usr/bin/env bash
# examples/dns as it ships (only its three ports made free for the run):
# it starts without root, answers fake IPs from 198.18.0.0/16 with TTL 1
# over UDP and TCP, its on_dns blocks ads.example and below and maps
# printer.example / nas.example, and at SIGTERM it exits 0 and saves its
# mappings to the default per-bundle state file.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/dnslib.bash"

dns_init
src=$CHUTE_TOP/examples/dns/main.lua
for want in '"127.0.0.1:5353"' '"127.0.0.1:1080"' '"127.0.0.1:8080"'; do
    grep -q -F "$want" "$src" || fail "examples/dns/main.lua no longer listens on $want"
done
sed -e "s/\"127\.0\.0\.1:5353\"/\"127.0.0.1:$DNS_PORT\"/" \
    -e "s/\"127\.0\.0\.1:1080\"/\"127.0.0.1:$SOCKS_PORT\"/" \
    -e "s/\"127\.0\.0\.1:8080\"/\"127.0.0.1:$HTTP_PORT\"/" "$src" >"$BUNDLE/main.lua"
cp "$CHUTE_TOP/examples/dns/README.md" "$BUNDLE/" 2>/dev/null || true

# The default state file: <state dir>/fakeip-<FNV-1a of the bundle's real
# path>.txt, the state dir being /var/lib/chute for root, else
# $XDG_STATE_HOME/chute (pointed into the temp dir here).
export XDG_STATE_HOME=$E2E_TMP/state
if [ "$(id -u)" = 0 ]; then sdir=/var/lib/chute; else sdir=$XDG_STATE_HOME/chute; fi
DEFAULT_STATE=$sdir/$(python3 - "$BUNDLE" <<'PY'
import os, sys
h = 2166136261
for b in os.path.realpath(sys.argv[1]).encode():
    h = ((h ^ b) * 16777619) & 0xFFFFFFFF
print(f"fakeip-{h:08x}.txt")
PY
)
# lib.sh's cleanup, plus the state file this run leaves outside the temp dir
eval "lib_$(declare -f e2e_cleanup)"
e2e_cleanup() {
    local rc=$?
    set +e # (exit "$rc") below must not end the trap
    rm -f "$DEFAULT_STATE"
    (exit "$rc")
    lib_e2e_cleanup
}
rm -f "$DEFAULT_STATE"

chute_start
wait_port 127.0.0.1 "$DNS_PORT" 10 || fail "the example's DNS listener does not accept"

full=$(dfull example.com A)
assert_eq NOERROR "$(dstatus "$full")" "example.com: NOERROR"
f=$(dq example.com A)
assert_in_net "$f" 198.18.0.0/16 "example.com: a fake IP from the example's range ($f)"
assert_eq 1 "$(dttl "$full")" "TTL 1"
assert_eq "$f" "$(dq example.com A +tcp)" "the same answer over TCP"
assert_eq NXDOMAIN "$(dstatus "$(dfull ads.example A)")" "on_dns blocks ads.example"
assert_eq NXDOMAIN "$(dstatus "$(dfull x.ads.example A)")" "and x.ads.example"
assert_eq 192.168.1.20 "$(dq printer.example A)" "on_dns maps printer.example"
assert_eq fd00::30 "$(dq nas.example AAAA)" "on_dns maps nas.example's AAAA"
assert_eq 192.168.1.30 "$(dq nas.example A)" "and its A"
chute_stop_within 5
check "the mappings were saved to the default state file ($DEFAULT_STATE)"
grep -q -E "^$f example\.com$" "$DEFAULT_STATE" || fail "no '$f example.com' line in $DEFAULT_STATE"
e2e_pass
