#!/usr/bin/env bash
# Policy groups over real Shadowsocks servers, through the TUN:
#   fallback      the first healthy member; ssA dies -> new flows go to ssB
#                 within the check interval; ssA back -> back to ssA
#   url-test      slow (ssA behind a relay adding 300 ms) vs ssB: ssB wins
#   select        starts on its `selected` member; chute.select from
#                 route() switches it for the flows that follow
#   load-balance  16 hosts spread over both members, each host always on
#                 the same member; with ssA down all go to ssB
# The stats' "groups" lines show each group's state, and health_checks,
# health_failures and group_switches move.
. "$(dirname "$0")/outlib.bash"
need_root
need_cmd ss-server
netns_setup
servers_start http

# Destinations for the load-balance group (it hashes the host, not the
# port): 16 more addresses of the server namespace, 10.200.0.101..116,
# each answering on :9201 with "ok <its address>".
for i in $(seq 101 116); do
    ip -n "$NS_SRV" addr add "10.200.0.$i/32" dev veth1
done
cat >"$NETNS_TMP/hello.py" <<'PY'
import socket, sys
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("0.0.0.0", 9201))
ls.listen(64)
open(sys.argv[1], "w").write("ready\n")
while True:
    c, _ = ls.accept()
    c.sendall(b"ok %s\n" % c.getsockname()[0].encode())
    c.close()
PY
bg_in "$NS_SRV" "$NETNS_TMP/hello.log" "$PY" "$NETNS_TMP/hello.py" "$NETNS_TMP/hello.ready"
wait_file "$NETNS_TMP/hello.ready" 10 || fail "the hello servers did not start"

# A relay in front of ssA that holds every server -> client chunk 300 ms.
cat >"$NETNS_TMP/slow.py" <<'PY'
import socket, sys, threading, time
host, port, target = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def pump(a, b, delay):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            if delay:
                time.sleep(delay)
            b.sendall(d)
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((host, port))
ls.listen(64)
open(sys.argv[4], "w").write("ready\n")
while True:
    c, _ = ls.accept()
    try:
        u = socket.create_connection((host, target))
    except OSError:
        c.close()
        continue
    threading.Thread(target=pump, args=(c, u, 0), daemon=True).start()
    threading.Thread(target=pump, args=(u, c, 0.3), daemon=True).start()
PY

ss_start 8401 aes-128-gcm "group-pw"
SSA_PID=$BG_PID
ss_start 8402 aes-128-gcm "group-pw"
bg_in "$NS_SRV" "$NETNS_TMP/slow.log" "$PY" "$NETNS_TMP/slow.py" "$SRV4" 8411 8402 "$NETNS_TMP/slow.ready"
wait_file "$NETNS_TMP/slow.ready" 10 || fail "the slow relay did not start"

CHECK_URL="http://$SRV4:$HTTP_PORT/small"
tun_bundle <<LUA
local ss = { type = "shadowsocks", server = "$SRV4", cipher = "aes-128-gcm", password = "group-pw" }
local function with_port(p) local t = {} for k, v in pairs(ss) do t[k] = v end t.port = p return t end
chute.proxy "ssA" (with_port(8401))
chute.proxy "ssB" (with_port(8402))
chute.proxy "slow" (with_port(8411))
chute.group "fb" { type = "fallback", proxies = { "ssA", "ssB" }, url = "$CHECK_URL",
                   interval = 1, timeout = 1 }
chute.group "ut" { type = "url-test", proxies = { "slow", "ssB" }, url = "$CHECK_URL",
                   interval = 1, timeout = 2, tolerance = 100 }
chute.group "sel" { type = "select", proxies = { "ssA", "ssB", "DIRECT" }, selected = "ssB" }
chute.group "lb" { type = "load-balance", proxies = { "ssA", "ssB" } }
function chute.route(flow)
  if flow.dst_port == 9999 then
    chute.select("sel", "DIRECT")
    return "REJECT"
  end
  if flow.dst_port == 9201 then return "lb" end
  if flow.dst_ip == "$SRV6" then return "sel" end
  if flow.dst_port == $ALT_PORT then return "ut" end
  return "fb"
end
LUA
tun_chute_start

# groups_read: SIGUSR1, then the newest "groups" block as GRP_TEXT (one group a line).
groups_read() {
    stats_read "${1:-S}"
    # The "groups" lines (one per group) right before the newest stats line.
    GRP_TEXT=$(awk '/ info  groups / { if (!grab) blk = ""; sub(/.* info  groups /, "");
                                      blk = blk $0 "\n"; grab = 1; next }
                  / stats flows_active=/ { if (grab) last = blk; grab = 0 }
                  END { printf "%s", last }' "$CHUTE_LOG")
}
group_line() { grep -E "^$1=" <<<"$GRP_TEXT" | head -n 1; }
# wait_group NAME REGEX SECONDS: until the group's line matches.
wait_group() {
    local i
    for i in $(seq $(($3 * 2))); do
        groups_read G
        grep -q -E -- "$2" <<<"$(group_line "$1")" && return 0
        sleep 0.5
    done
    return 1
}
# via_of PORT [HOST]: fetches /small on HOST:PORT and prints the member the flow line names.
via_of() {
    local host=${2:-$SRV4} url n
    case $host in *:*) url="http://[$host]:$1/small" ;; *) url="http://$host:$1/small" ;; esac
    n=$(flow_lines "" | wc -l)
    assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 10 "$url")" "GET $url" >/dev/null
    for _ in $(seq 50); do
        [ "$(flow_lines "" | wc -l)" -gt "$n" ] && break
        sleep 0.05
    done
    flow_lines "" | tail -n 1 | sed -n -E 's/.* via=([^ ]+) .*/\1/p'
}

check "the first health checks: every member gets a latency"
wait_group fb "^fb=fallback:ssA ssA=[0-9]+ms ssB=[0-9]+ms" 6 || fail "fb has no results: $(group_line fb)"
wait_group ut "^ut=url-test:ssB slow=[0-9]+ms ssB=[0-9]+ms" 8 || fail "url-test did not pick ssB: $(group_line ut)"
say "groups: $(tr '\n' '|' <<<"$GRP_TEXT")"
slow_ms=$(group_line ut | sed -n -E 's/.* slow=([0-9]+)ms.*/\1/p')
assert_ge 300 "$slow_ms" "the slow member's latency (ms) includes the relay's 300 ms"
assert_match "^sel=select:ssB " "$(group_line sel)" "sel starts on its selected member"
assert_match "^lb=load-balance ssA=.* ssB=" "$(group_line lb)" "lb lists its members"
assert_ge 2 "$G_health_checks" "health_checks"

check "flows follow the groups' choices"
assert_eq ssA "$(via_of "$HTTP_PORT")" "fb -> ssA (the first healthy)"
assert_eq ssB "$(via_of "$ALT_PORT")" "ut -> ssB (the faster)"
assert_eq ssB "$(via_of "$HTTP_PORT" "$SRV6")" "sel -> ssB (selected)"
assert_log "policy=fb via=ssA " "the flow line shows the group and the member"

check "load-balance: 16 hosts, twice each, each on one member, both members used"
lb_run() {
    cli_py <<'PY'
import socket, sys
bad = 0
for rnd in range(2):
    for i in range(101, 117):
        host = "10.200.0.%d" % i
        try:
            s = socket.create_connection((host, 9201), timeout=5)
            s.settimeout(5)
            if s.makefile("rb").readline() != b"ok %s\n" % host.encode():
                bad += 1
            s.close()
        except OSError:
            bad += 1
print(f"bad={bad}")
PY
}
out=$(lb_run)
assert_eq "bad=0" "$out" "answers through lb"
sleep 0.5
declare -A member=()
for i in $(seq 101 116); do
    m=$(flow_lines "-> 10\.200\.0\.$i:9201 policy=lb " | sed -n -E 's/.* via=([^ ]+) .*/\1/p' | sort -u | tr '\n' ' ')
    [ "$(wc -w <<<"$m")" = 1 ] || fail "host 10.200.0.$i went through more than one member (or none): '$m'"
    member[$i]=${m% }
done
used=$(printf '%s\n' "${member[@]}" | sort | uniq -c | tr '\n' ' ')
say "lb spread: $used"
assert_eq 2 "$(printf '%s\n' "${member[@]}" | sort -u | wc -l)" "members used by lb"

check "chute.select from route(): sel switches to DIRECT for the flows that follow"
cli_curl -o /dev/null --max-time 3 "http://$SRV4:9999/" >/dev/null 2>&1 || true
groups_read
assert_match "^sel=select:DIRECT " "$(group_line sel)" "sel's state after chute.select"
assert_eq "$SHA_SMALL" "$(cli_fetch_sha --max-time 10 "http://[$SRV6]:$HTTP_PORT/small")" "GET through sel"
sleep 0.3
last=$(flow_lines "-> \[fd20::2\]:$HTTP_PORT " | tail -n 1)
assert_match "policy=sel via=DIRECT " "$last" "the flow after the switch went DIRECT"

check "fallback: ssA dies -> fb moves to ssB within the interval"
G0_switches=$G_group_switches
kill -TERM "$SSA_PID"
wait_stopped "$SSA_PID" 5 || fail "ssA did not stop"
t0=$(now)
wait_group fb "^fb=fallback:ssB ssA=down " 5 || fail "fb did not move to ssB: $(group_line fb)"
say "fb moved to ssB $(elapsed "$t0")s after ssA died"
for i in 1 2 3; do
    assert_eq ssB "$(via_of "$HTTP_PORT")" "flow $i through fb after the failure"
done
groups_read
assert_ge 1 "$S_health_failures" "health_failures"
SW_AFTER_FAILOVER=$S_group_switches
check "load-balance with ssA down (lb has no checks of its own): the first flow through ssA fails and marks it down, every later one goes to ssB"
n0=$(flow_lines "" | wc -l)
out=$(lb_run)
assert_match "^bad=[01]$" "$out" "lb flows that failed with ssA down (at most the first)"
if [ "$out" = bad=1 ]; then
    assert_log "flow [0-9]+: connect 10\.200\.0\.[0-9]+:9201: proxy server refused the connection" \
        "the failed flow's log line blames the proxy server, not the destination"
fi
sleep 0.3
groups_read
assert_match "^lb=load-balance ssA=down ssB=" "$(group_line lb)" "lb marked ssA down after the failed connection"
assert_le() { check "$3"; [ "$2" -le "$1" ] 2>/dev/null || fail "$3: expected <= $1, got '$2'"; }
assert_le 1 "$(flow_lines "" | tail -n +$((n0 + 1)) | grep -c "policy=lb via=ssA" || true)" "lb flows through the dead ssA"

check "ssA back: fb returns to it"
ss_start 8401 aes-128-gcm "group-pw"
wait_group fb "^fb=fallback:ssA ssA=[0-9]+ms" 6 || fail "fb did not return to ssA: $(group_line fb)"
assert_eq ssA "$(via_of "$HTTP_PORT")" "fb -> ssA again"
assert_eq 0 "$(flow_lines "close=(reset|error)" | wc -l)" "no flow was reset"
# Checked last so that a failure here does not hide the checks above.
assert_ge $((G0_switches + 1)) "$SW_AFTER_FAILOVER" "group_switches counted fb's move from ssA to ssB"
chute_alive
pass
