# shellcheck shell=bash
# Shared helpers for spec/e2e/<area>/NN-name.sh. Source it, then:
#
#   e2e_init                      temp dir + cleanup trap (always first)
#   origin_start [--big]          nginx on 127.0.0.1 and [::1] serving $WWW
#   bundle_write <<'LUA' ... LUA  main.lua = config header + the route code given
#   chute_start                   chute run $BUNDLE, waits until its listeners accept
#
# Exit codes follow ctest: 0 pass, 1 fail (`fail MSG`), 77 skip (`skip WHY`);
# a missing peer (need_cmd) skips, or fails with CI=true.
# ctest sets CHUTE (the binary) and CHUTE_TOP (the tree); by hand they
# default to the tree this file lives in and its build/chute.
#
# Only loopback addresses are used: 127.0.0.1 and ::1.

set -euo pipefail

CHUTE_TOP=${CHUTE_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
CHUTE=${CHUTE:-$CHUTE_TOP/build/chute}
TEST_NAME=$(basename "${BASH_SOURCE[1]:-$0}" .sh)

E2E_TMP=""
CHUTE_PID=""
CHUTE_LOG=""
NGINX_PID=""
E2E_EXTRA_PIDS=()

# ---------------------------------------------------------------- reporting

say() { printf '%s: %s\n' "$TEST_NAME" "$*"; }

# `check` announces an assertion before it runs, so a log shows what passed.
check() { printf '%s: check: %s\n' "$TEST_NAME" "$*"; }

fail() {
    printf '%s: FAIL: %s\n' "$TEST_NAME" "$*" >&2
    exit 1
}

skip() {
    printf '%s: SKIP: %s\n' "$TEST_NAME" "$*"
    exit 77
}

# have_cmd PROGRAM: 0 if PROGRAM (a peer or a harness tool) is on PATH.
# If not, says so with the Debian package that installs it (spec/peers)
# and returns 1; with CI=true in the environment it fails the test
# instead, because CI must run every check. (spec/unit/peer.h does the
# same for the unit interop tests.) Skips for other reasons (not root, no
# ::1) stay skips.
have_cmd() {
    command -v "$1" >/dev/null 2>&1 && return 0
    local pkg
    pkg=$(awk -v p="$1" '!/^#/ && $1 == p { print $2; exit }' "$CHUTE_TOP/spec/peers" 2>/dev/null || true)
    local msg="peer $1 is not on PATH (${pkg:+Debian package $pkg; }scripts/bootstrap installs it)"
    [ "${CI:-}" = true ] && fail "$msg: with CI=true a test that cannot run its peer fails"
    say "$msg"
    return 1
}

# need_cmd PROGRAM...: skips the test (fails with CI=true) unless each is on PATH.
need_cmd() {
    local c
    for c in "$@"; do
        have_cmd "$c" || skip "needs $c"
    done
}

# ---------------------------------------------------------------- lifecycle

e2e_init() {
    need_cmd python3 curl sha256sum
    [ -x "$CHUTE" ] || fail "no chute binary at $CHUTE (set CHUTE or build into \$CHUTE_TOP/build)"
    E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/chute-e2e-$TEST_NAME.XXXXXX")
    BUNDLE=$E2E_TMP/bundle
    WWW=$E2E_TMP/www
    mkdir -p "$BUNDLE" "$WWW"
    # Signals exit through EXIT so cleanup runs exactly once. PIPE and HUP
    # too: a test piped into `head` must not leave its nginx behind.
    trap e2e_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    trap 'exit 141' PIPE
    e2e_pick_ports
}

e2e_cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP PIPE
    set +e
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
        if [ -n "$CHUTE_LOG" ] && [ -s "$CHUTE_LOG" ]; then
            printf -- '--- last 40 lines of the chute log (%s) ---\n' "$CHUTE_LOG" >&2
            tail -n 40 "$CHUTE_LOG" >&2
            printf -- '---\n' >&2
        fi
        if [ -n "$E2E_TMP" ] && [ -s "$E2E_TMP/nginx-error.log" ]; then
            printf -- '--- nginx error log ---\n' >&2
            tail -n 10 "$E2E_TMP/nginx-error.log" >&2
        fi
    fi
    local p
    for p in "${E2E_EXTRA_PIDS[@]}" $(jobs -p) $CHUTE_PID $NGINX_PID; do
        kill_wait "$p"
    done
    [ -n "$E2E_TMP" ] && rm -rf "$E2E_TMP"
    e2e_ports_release
    exit "$rc"
}

# kill_wait PID: TERM, then KILL after 3 s if it is still there.
kill_wait() {
    local pid=$1
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 30); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 0
}

# Sets ORIGIN_PORT, ALT_PORT (a second nginx port, so route() can tell two
# destinations apart by flow.dst_port), SOCKS_PORT and HTTP_PORT.
e2e_pick_ports() {
    local ports
    ports=$(e2e_ports 4) || fail "e2e_ports: no 4 free ports"
    read -r ORIGIN_PORT ALT_PORT SOCKS_PORT HTTP_PORT <<<"$ports"
}

# e2e_ports N: N ports for this test, free on 127.0.0.1 (TCP and UDP) and,
# where the machine has it, on ::1 (TCP), and held for it until it ends.
# They come from one registry for the machine (E2E_PORTS, a file of "port
# pid start-time" lines, changed under flock), so tests running in parallel
# (ctest -j, or other trees) never get the same port; and from outside the
# kernel's ephemeral range (ip_local_port_range), so no connect(), no dig's
# source port and no bind(0) elsewhere can take one between the pick and
# the listen, or while chute restarts. A line whose process is gone (same
# pid, other start time: reused) is free again; e2e_cleanup drops ours.
E2E_PORTS=${E2E_PORTS:-/tmp/chute-e2e-ports}
e2e_ports() {
    python3 - "$E2E_PORTS" "$$" "$1" <<'PY'
import errno, fcntl, os, socket, sys
path, owner, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def started(pid):  # field 22 of /proc/PID/stat, or None when PID is gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None

def free(port):
    tries = [(socket.AF_INET, socket.SOCK_STREAM, "127.0.0.1"),
             (socket.AF_INET, socket.SOCK_DGRAM, "127.0.0.1"),
             (socket.AF_INET6, socket.SOCK_STREAM, "::1")]
    for fam, kind, host in tries:
        try:
            s = socket.socket(fam, kind)
        except OSError:
            continue  # no IPv6 here
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return False  # (other errors: no ::1 here)
        finally:
            s.close()
    return True

with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
    lo, hi = map(int, f.read().split())
cands = [p for p in range(10000, 65536) if not lo <= p <= hi]
try:
    fd = os.open(path, os.O_RDWR)
except FileNotFoundError:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    os.fchmod(fd, 0o666)  # tests run as root and as users share it
fcntl.flock(fd, fcntl.LOCK_EX)
with os.fdopen(fd, "r+") as f:
    held = {}
    for line in f:
        try:
            port, pid, start = map(int, line.split())
        except ValueError:
            continue
        if started(pid) == start:
            held[port] = (pid, start)
    me = (owner, started(owner))
    out = []
    first = owner * 7919 % len(cands)  # tests start their search apart
    for i in range(len(cands)):
        port = cands[(first + i) % len(cands)]
        if port not in held and free(port):
            held[port] = me
            out.append(port)
            if len(out) == n:
                break
    f.seek(0)
    f.truncate()
    f.writelines(f"{p} {o[0]} {o[1]}\n" for p, o in sorted(held.items()))
if len(out) < n:
    sys.exit(f"only {len(out)} of {n} ports free outside {lo}-{hi}")
print(*out)
PY
}

# e2e_ports_release: this test's ports go back to the registry.
e2e_ports_release() {
    [ -f "$E2E_PORTS" ] || return 0
    python3 - "$E2E_PORTS" "$$" <<'PY'
import fcntl, sys
with open(sys.argv[1], "r+") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    keep = [l for l in f if l.split()[1:2] != [sys.argv[2]]]
    f.seek(0)
    f.truncate()
    f.writelines(keep)
PY
}

# DIG_WAIT: how dig waits for an answer. One try, because tests count
# queries exactly and a retransmission would count twice; 5 s, because a
# sanitizer build on a loaded machine can answer late. An answer takes
# milliseconds, so the wait costs time only when a test fails anyway.
# shellcheck disable=SC2034 # for the tests that run dig
DIG_WAIT=(+time=5 +tries=1)

have_ipv6_loopback() {
    python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1",0))' 2>/dev/null
}

# wait_port HOST PORT [SECONDS]: until a TCP connect succeeds.
wait_port() {
    local host=$1 port=$2 secs=${3:-10}
    # WAIT_IN=NS runs the probe inside network namespace NS (netns.sh).
    ${WAIT_IN:+ip netns exec "$WAIT_IN"} python3 - "$host" "$port" "$secs" <<'PY'
import socket, sys, time
host, port, deadline = sys.argv[1], int(sys.argv[2]), time.time() + float(sys.argv[3])
while True:
    try:
        socket.create_connection((host, port), timeout=1).close()
        sys.exit(0)
    except OSError:
        if time.time() > deadline:
            sys.exit(1)
        time.sleep(0.05)
PY
}

# ---------------------------------------------------------------- origin

# Files every origin serves: small (text), 1m.bin; with --big, big.bin
# (100 MiB of random bytes). Their digests are in SHA_<name>.
# shellcheck disable=SC2034 # the SHA_ variables are for the tests
origin_files() {
    printf 'hello from the e2e origin\n' >"$WWW/small"
    head -c 1048576 /dev/urandom >"$WWW/1m.bin"
    SHA_SMALL=$(sha_file "$WWW/small")
    SHA_1M=$(sha_file "$WWW/1m.bin")
    if [ "${1:-}" = "--big" ]; then
        head -c 104857600 /dev/urandom >"$WWW/big.bin"
        SHA_BIG=$(sha_file "$WWW/big.bin")
    fi
}

# origin_start [--big]: nginx in the foreground of a background job, as
# whatever user runs the test (no `user` directive, all paths in $E2E_TMP).
# The access log records method, uri, status, request length (with body),
# the connection serial and the address the request arrived on, so tests
# can see what reached the origin and how.
origin_start() {
    need_cmd nginx
    origin_files "${1:-}"
    mkdir -p "$E2E_TMP/nginx"
    local v6=""
    have_ipv6_loopback && v6="listen [::1]:$ORIGIN_PORT; listen [::1]:$ALT_PORT;"
    cat >"$E2E_TMP/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $E2E_TMP/nginx.pid;
error_log $E2E_TMP/nginx-error.log warn;
events { worker_connections 4096; }
http {
    default_type application/octet-stream;
    log_format e2e '\$request_method \$uri \$status \$request_length \$body_bytes_sent conn=\$connection srv=\$server_addr';
    access_log $E2E_TMP/access.log e2e;
    client_body_temp_path $E2E_TMP/nginx/body;
    proxy_temp_path $E2E_TMP/nginx/proxy;
    fastcgi_temp_path $E2E_TMP/nginx/fastcgi;
    uwsgi_temp_path $E2E_TMP/nginx/uwsgi;
    scgi_temp_path $E2E_TMP/nginx/scgi;
    sendfile on;
    keepalive_timeout 60s;
    keepalive_requests 100000;
    server {
        listen 127.0.0.1:$ORIGIN_PORT;
        listen 127.0.0.1:$ALT_PORT;
        $v6
        server_name _;
        root $WWW;
        client_max_body_size 512m;
        # POST target. \`return\` alone would answer before reading the body;
        # proxying to /sink makes nginx read all of it, so the access log's
        # request length shows whether the body arrived.
        location = /post { proxy_pass http://127.0.0.1:$ORIGIN_PORT/sink; }
        location = /sink { return 200 "posted\n"; }
        # PUT target: the body is stored as a file, so its digest can be checked.
        location /upload/ { dav_methods PUT; create_full_put_path on; }
    }
}
EOF
    nginx -p "$E2E_TMP/nginx" -c "$E2E_TMP/nginx.conf" -e "$E2E_TMP/nginx-error.log" &
    NGINX_PID=$!
    wait_port 127.0.0.1 "$ORIGIN_PORT" 10 || fail "nginx did not start (see $E2E_TMP/nginx-error.log)"
}

# ---------------------------------------------------------------- bundle + chute

# bundle_config [EXTRA_LUA]: the config header every test bundle starts
# with. SOCKS_USERS (a Lua table literal) turns on SOCKS5 authentication;
# SOCKS_LISTEN overrides the SOCKS5 address (default 127.0.0.1:$SOCKS_PORT).
bundle_config() {
    local users=""
    [ -n "${SOCKS_USERS:-}" ] && users=", users = $SOCKS_USERS"
    cat <<EOF
local chute = require "chute"
chute.config {
  log_level = "info",
  fallback = "DIRECT",
  listen = {
    socks = { address = "${SOCKS_LISTEN:-127.0.0.1:$SOCKS_PORT}"$users },
    http = { address = "127.0.0.1:$HTTP_PORT" },
  },
  timeouts = { connect = 5, idle = 60 },
${1:-}
}
EOF
}

# bundle_write [EXTRA_CONFIG_LUA] < route code: writes $BUNDLE/main.lua.
# Unquoted shell in the heredoc may use $ORIGIN_PORT etc.
bundle_write() {
    { bundle_config "${1:-}"; cat; } >"$BUNDLE/main.lua.new"
    # rename: a reload never sees a half-written file
    mv "$BUNDLE/main.lua.new" "$BUNDLE/main.lua"
}

# line_of PATTERN [FILE]: the line number of the first fixed-string match,
# so assertions about file:line follow the generated script.
line_of() {
    local n
    n=$(grep -n -F -m1 -- "$1" "${2:-$BUNDLE/main.lua}" | cut -d: -f1)
    [ -n "$n" ] || fail "line_of: '$1' not in ${2:-$BUNDLE/main.lua}"
    echo "$n"
}

# chute_start: run the bundle in the background, stderr to $CHUTE_LOG,
# and wait until both listeners accept connections.
chute_start() {
    CHUTE_LOG=$E2E_TMP/chute.log
    # A restart starts a fresh log; the previous run's stays beside it.
    [ -s "$CHUTE_LOG" ] && mv "$CHUTE_LOG" "$CHUTE_LOG.prev"
    : >"$CHUTE_LOG"
    "$CHUTE" run "$BUNDLE" 2>>"$CHUTE_LOG" &
    CHUTE_PID=$!
    local host=127.0.0.1
    case "${SOCKS_LISTEN:-}" in \[*) host=::1 ;; esac
    wait_port "$host" "$SOCKS_PORT" 10 || { chute_alive; fail "chute's SOCKS5 listener does not accept"; }
    wait_port 127.0.0.1 "$HTTP_PORT" 10 || { chute_alive; fail "chute's HTTP listener does not accept"; }
}

# chute_alive: fails unless the chute we started is still running.
chute_alive() {
    kill -0 "$CHUTE_PID" 2>/dev/null || {
        local rc=0
        wait "$CHUTE_PID" || rc=$?
        CHUTE_PID=""
        fail "chute exited (status $rc)"
    }
}

# chute_stop_within SECONDS: SIGTERM, then the exit status must be 0 in time.
chute_stop_within() {
    local secs=$1 pid=$CHUTE_PID rc=0 start
    check "SIGTERM: chute exits with status 0 within ${secs}s"
    start=$(date +%s.%N)
    kill -TERM "$pid"
    python3 - "$pid" "$secs" <<'PY' || fail "chute still running ${secs}s after SIGTERM"
import os, sys, time
pid, deadline = int(sys.argv[1]), time.time() + float(sys.argv[2])
while time.time() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit(0)
    # a zombie has exited: the shell just has not reaped it yet
    with open(f"/proc/{pid}/stat") as f:
        if f.read().rsplit(")", 1)[1].split()[0] == "Z":
            sys.exit(0)
    time.sleep(0.02)
sys.exit(1)
PY
    wait "$pid" || rc=$?
    CHUTE_PID=""
    [ "$rc" -eq 0 ] || fail "chute exited with status $rc after SIGTERM, expected 0"
    say "chute exited 0 after $(elapsed "$start")s"
}

# e2e_pass: the end of every test. chute must still be running and must
# stop cleanly (status 0 within 5 s: under ASan that includes no leaks), and
# its log must hold no sanitizer report; then "pass".
e2e_pass() {
    if [ -n "$CHUTE_PID" ]; then
        chute_alive
        chute_stop_within 5
    fi
    if [ -n "$CHUTE_LOG" ]; then
        assert_no_log 'ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error: ' \
            "no sanitizer report in chute's log"
    fi
    say "pass"
}

# ---------------------------------------------------------------- chute's log

# Flow lines look like:
#   flow 3 tcp socks 127.0.0.1:60168 -> ads.example:80 policy=REJECT rule="route" up=0 down=0 ...
# Lines are written when a flow closes, which can be a moment after the
# client is done, so the log assertions poll.

log_count() { grep -c -E -- "$1" "$CHUTE_LOG" || true; }

# wait_log REGEX [SECONDS]: 0 once a line matches, 1 after SECONDS (default 5).
wait_log() {
    local re=$1 secs=${2:-5}
    for _ in $(seq $((secs * 20))); do
        grep -q -E -- "$re" "$CHUTE_LOG" && return 0
        sleep 0.05
    done
    return 1
}

# wait_log_count REGEX N [SECONDS]: waits until at least N lines match (or
# SECONDS pass), a little longer for stragglers, then prints the count, so
# the caller can assert it is exactly N.
wait_log_count() {
    local re=$1 want=$2 secs=${3:-10} n=0
    for _ in $(seq $((secs * 10))); do
        n=$(log_count "$re")
        [ "$n" -ge "$want" ] && break
        sleep 0.1
    done
    sleep 0.2
    log_count "$re"
}

assert_log() {
    local re=$1 msg=$2
    check "$msg"
    wait_log "$re" "${3:-5}" || fail "$msg: no line in chute's log matches /$re/"
}

assert_no_log() {
    local re=$1 msg=$2
    check "$msg"
    if grep -q -E -- "$re" "$CHUTE_LOG"; then
        grep -E -- "$re" "$CHUTE_LOG" | head -n 5 >&2
        fail "$msg: chute's log has lines matching /$re/"
    fi
}

# flow_lines REGEX: the flow lines (no other log lines) that match REGEX.
flow_lines() { grep -E 'info  flow [0-9]+ (tcp|udp) ' "$CHUTE_LOG" | grep -E -- "$1" || true; }

# The n-th flow line (1-based) that matches REGEX, for field checks.
flow_line() { flow_lines "$1" | sed -n "${2:-1}p"; }

# flow_field LINE KEY: up/down/policy/close value out of a flow line.
flow_field() { sed -n -E "s/.* $2=([^ ]+).*/\\1/p" <<<"$1"; }

# decided NAME: the policy chute gave a new SOCKS5 flow (to $SOCKS_PORT)
# to NAME:81, from its flow line (waited for up to 5 s).
decided() {
    local before
    before=$(flow_lines "-> $1:81 " | wc -l)
    curl --silent --max-time 5 -o /dev/null -x "socks5h://127.0.0.1:$SOCKS_PORT" "http://$1:81/" || true
    for _ in $(seq 50); do
        [ "$(flow_lines "-> $1:81 " | wc -l)" -gt "$before" ] && break
        sleep 0.1
    done
    flow_lines "-> $1:81 " | tail -n 1 | sed -n -E 's/.* policy=([^ ]+).*/\1/p'
}

# wait_more REGEX N [SECONDS]: until more than N log lines match REGEX.
wait_more() {
    for _ in $(seq $((${3:-10} * 10))); do
        [ "$(log_count "$1")" -gt "$2" ] && return 0
        sleep 0.1
    done
    fail "no new line matching /$1/ in ${3:-10} s"
}

# count_flows_down_ge REGEX MIN: flow lines matching REGEX with down >= MIN.
count_flows_down_ge() {
    flow_lines "$1" | sed -n -E 's/.* down=([0-9]+) .*/\1/p' | awk -v m="$2" '$1 >= m { n++ } END { print n + 0 }'
}

# flows_down_ge REGEX MIN WANT: count_flows_down_ge once WANT such lines
# are there or 10 s went by: a flow's line is written when both of its
# sides have closed, which can be a moment after the client is done.
flows_down_ge() {
    local n
    for _ in $(seq 100); do
        n=$(count_flows_down_ge "$1" "$2")
        [ "$n" -ge "$3" ] && break
        sleep 0.1
    done
    echo "$n"
}

# peak_flows REGEX: the most flows matching REGEX that were open at once,
# from each line's close timestamp and its time= duration.
peak_flows() {
    flow_lines "$1" | awk '{
        split($2, t, ":"); end = t[1] * 3600 + t[2] * 60 + t[3]
        d = $0; sub(/.* time=/, "", d); sub(/s .*/, "", d)
        printf "%.3f 1\n%.3f -1\n", end - d, end
    }' | sort -k1,1g -k2,2n | awk '{ n += $2; if (n > m) m = n } END { print m + 0 }'
}

# ---------------------------------------------------------------- assertions

assert_eq() {
    local want=$1 got=$2 msg=$3
    check "$msg"
    [ "$got" = "$want" ] || fail "$msg: expected '$want', got '$got'"
}

assert_ge() {
    local min=$1 got=$2 msg=$3
    check "$msg"
    [ "$got" -ge "$min" ] 2>/dev/null || fail "$msg: expected >= $min, got '$got'"
}

assert_match() {
    local re=$1 text=$2 msg=$3
    check "$msg"
    grep -q -E -- "$re" <<<"$text" || fail "$msg: /$re/ not in: $(head -c 600 <<<"$text")"
}

sha_file() { sha256sum "$1" | cut -d' ' -f1; }

# fetch_sha CURL_ARGS...: sha256 of the body; fails on any curl error. Use
# as got=$(fetch_sha ...): the failure leaves the subshell and set -e ends
# the test.
fetch_sha() {
    local out rc=0
    out=$(curl --silent --show-error --fail --max-time 120 "$@" | sha256sum) || rc=$?
    [ "$rc" -eq 0 ] || fail "curl $* failed (pipeline status $rc)"
    cut -d' ' -f1 <<<"$out"
}

# curl_rc CURL_ARGS...: curl's exit status (output discarded), never fails.
curl_rc() {
    local rc=0
    curl --silent --max-time 20 -o /dev/null "$@" 2>/dev/null || rc=$?
    echo "$rc"
}

# http_status CURL_ARGS...: the status line code curl saw ("000" if none).
http_status() {
    curl --silent --max-time 20 -o /dev/null -w '%{http_code}' "$@" 2>/dev/null || true
}

# now / elapsed START: wall-clock seconds with milliseconds.
now() { date +%s.%N; }
elapsed() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.3f", e - s }'; }

# lt A B: A < B for decimals.
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
