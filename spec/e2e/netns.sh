# The network-namespace harness for the TUN path (spec/e2e/tun/NN-name.sh).
# Source it from a test, then:
#
#   need_root                  exit 77 unless root and `ip netns add` works
#   tun_env_up [SERVERS...]    namespaces + veth + servers (default: all of
#                              http udp dns iperf) + the default bundle
#                              (route: DIRECT) + chute with auto_route
#
# or the same in steps:
#
#   netns_setup                temp dir, cleanup trap, two namespaces, veth
#   servers_start [SERVERS...] http (nginx :80 and :8080), udp (echo :7),
#                              dns (dnsmasq :53), iperf (iperf3 -s -D :5201)
#   tun_bundle [EXTRA] <<LUA   main.lua = the TUN config header + the route code
#   tun_chute_start            chute in the client namespace; waits for the
#                              TUN and the auto_route rules
#   stats_read [PREFIX]        SIGUSR1; the newest "stats" lines become
#                              shell variables PREFIX_key (default S_key)
#   cli CMD... / srv CMD...    run CMD in the client / server namespace
#
# CHUTE_VIA_HOST=1 runs a suite through examples/embed/host (the packet API)
# instead of chute's own TUN device: CHUTE_VIA_HOST=1 ctest -R e2e/tun/
#
# TUN_EXTRA (Lua fields) is added to every bundle's tun = {...}: from the
# environment it runs a test on another data path, e.g.
#   TUN_EXTRA='offload = false' ctest -R e2e/tun/
#
# Layout, private to each run (names carry the shell's pid, so parallel
# tests and anyone's ccli/csrv never collide):
#
#   $NS_CLI  (cht<pid>c): chute, its TUN $TUN_DEV (198.19.0.1/30, fdfe::1/126),
#            veth0 10.200.0.1/24 + fd20::1/64. auto_route sends everything
#            without chute's mark (0x2022) into the TUN; chute's upstream
#            sockets are marked and leave through veth0.
#   $NS_SRV  (cht<pid>s): veth1 10.200.0.2/24 + fd20::2/64 with nginx,
#            a UDP echo, dnsmasq (test.example -> 10.200.0.2) and iperf3.
#
# The cleanup trap (EXIT, INT, TERM) kills every process this run started,
# deletes both namespaces and the temp dir; on a failure it prints the tail
# of chute's log first. Exit codes follow ctest: 0 pass, 1 fail, 77 skip.

# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # say, check, fail, skip, assert_*, log helpers
TEST_NAME=$(basename "$(dirname "${BASH_SOURCE[1]:-$0}")")/$(basename "${BASH_SOURCE[1]:-$0}" .sh)

NS_CLI="cht$$c"
NS_SRV="cht$$s"
TUN_DEV="cht$$t" # <= 15 bytes for any pid (pid_max is 2^22: 7 digits)
NS_PREFIX="cht$$"
CLI4=10.200.0.1
SRV4=10.200.0.2
CLI6=fd20::1
SRV6=fd20::2
HTTP_PORT=80
ALT_PORT=8080
ECHO_PORT=7
DNS_PORT=53
IPERF_PORT=5201
TUN_MARK=0x2022

NETNS_TMP=""
NETNS_MADE=()   # namespaces this run created
NETNS_PIDS=()   # processes this run started (servers, clients)
CHUTE_PID=""
CHUTE_LOG=""
BUNDLE=""
WWW=""
PY=""

# ---------------------------------------------------------------- setup

need_root() {
    if [ "$(id -u)" != 0 ]; then
        echo "skip: needs root for network namespaces"
        exit 77
    fi
    local probe="${NS_PREFIX}p"
    ip netns del "$probe" 2>/dev/null || true
    if ! ip netns add "$probe" 2>/dev/null; then
        echo "skip: needs root for network namespaces (ip netns add failed)"
        exit 77
    fi
    ip netns del "$probe"
    [ -c /dev/net/tun ] || skip "no /dev/net/tun"
}

cli() { ip netns exec "$NS_CLI" "$@"; }
srv() { ip netns exec "$NS_SRV" "$@"; }

# The temp dir lives on tmpfs (/dev/shm) when it has room for the big
# download file (1 GiB + slack), else under $TMPDIR or /tmp.
netns_tmpdir() {
    local base=${TMPDIR:-/tmp} avail
    if [ -d /dev/shm ] && [ -w /dev/shm ]; then
        avail=$(df -P -k /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')
        [ "${avail:-0}" -ge $((1536 * 1024)) ] && base=/dev/shm
    fi
    mktemp -d "$base/chute-tun-${TEST_NAME##*/}.XXXXXX"
}

netns_setup() {
    need_root
    need_cmd python3 curl sha256sum ip
    [ -x "$CHUTE" ] || fail "no chute binary at $CHUTE (set CHUTE or build into \$CHUTE_TOP/build)"
    NETNS_TMP=$(netns_tmpdir)
    BUNDLE=$NETNS_TMP/bundle
    WWW=$NETNS_TMP/www
    CHUTE_LOG=$NETNS_TMP/chute.log
    mkdir -p "$BUNDLE" "$WWW"
    : >"$CHUTE_LOG"
    # INT/TERM leave through EXIT, so the cleanup runs exactly once.
    trap netns_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    # The pyenv shim (if any) costs ~100 ms per start: use the interpreter.
    PY=$(python3 -c 'import sys; print(sys.executable)')
    local ns
    for ns in "$NS_CLI" "$NS_SRV"; do
        # A namespace with our pid in its name is a leftover of a dead run.
        ip netns del "$ns" 2>/dev/null || true
        ip netns add "$ns" || skip "needs root for network namespaces (ip netns add $ns failed)"
        NETNS_MADE+=("$ns")
        ip -n "$ns" link set lo up
        # No duplicate address detection, link-local addresses included
        # (a tentative fe80:: holds the first neighbour solicitation ~1 s).
        ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.accept_dad=0 \
            net.ipv6.conf.default.accept_dad=0 >/dev/null 2>&1 || true
    done
    # Created inside the namespaces: no name ever exists in the caller's.
    ip -n "$NS_CLI" link add veth0 type veth peer name veth1 netns "$NS_SRV" ||
        fail "veth pair"
    ip -n "$NS_CLI" addr add "$CLI4/24" dev veth0
    ip -n "$NS_CLI" addr add "$CLI6/64" dev veth0 nodad
    ip -n "$NS_SRV" addr add "$SRV4/24" dev veth1
    ip -n "$NS_SRV" addr add "$SRV6/64" dev veth1 nodad
    ip -n "$NS_CLI" link set veth0 up
    ip -n "$NS_SRV" link set veth1 up
    # The carrier comes through linkwatch, up to a second later; until the
    # operstate is UP the veth drops what it is given (a lost first SYN
    # costs its 1 s retransmission).
    local i
    for i in $(seq 100); do
        ip -n "$NS_CLI" -o link show dev veth0 | grep -q 'state UP' &&
            ip -n "$NS_SRV" -o link show dev veth1 | grep -q 'state UP' && break
        sleep 0.05
    done
    say "namespaces $NS_CLI (chute, tun $TUN_DEV) and $NS_SRV (servers) in $NETNS_TMP"
}

netns_cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    set +e
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
        if [ -n "$CHUTE_LOG" ] && [ -s "$CHUTE_LOG" ]; then
            printf -- '--- last 40 lines of the chute log (%s) ---\n' "$CHUTE_LOG" >&2
            tail -n 40 "$CHUTE_LOG" >&2
            printf -- '---\n' >&2
        fi
        local f
        for f in nginx-error.log dnsmasq.log iperf3.log udp-echo.log; do
            if [ -n "$NETNS_TMP" ] && [ -s "$NETNS_TMP/$f" ]; then
                printf -- '--- %s ---\n' "$f" >&2
                tail -n 10 "$NETNS_TMP/$f" >&2
            fi
        done
    fi
    [ -n "$CHUTE_PID" ] && kill_wait "$CHUTE_PID"
    local p
    for p in "${NETNS_PIDS[@]}" $(jobs -p); do
        kill_wait "$p"
    done
    # Daemons (iperf3 -D) and anything else still inside our namespaces:
    # every process there was started by this run.
    local ns
    for ns in "${NETNS_MADE[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do
            kill -KILL "$p" 2>/dev/null
        done
    done
    for ns in "${NETNS_MADE[@]}"; do
        for p in $(seq 20); do
            [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
            sleep 0.05
        done
        ip netns del "$ns" 2>/dev/null
    done
    [ -n "$NETNS_TMP" ] && rm -rf "$NETNS_TMP"
    exit "$rc"
}

# bg_in NS LOG CMD...: CMD in namespace NS in the background, output to
# LOG; its pid (ip netns exec execs CMD: the pid is CMD's) in BG_PID.
bg_in() {
    local ns=$1 log=$2
    shift 2
    ip netns exec "$ns" "$@" >>"$log" 2>&1 &
    BG_PID=$!
    NETNS_PIDS+=("$BG_PID")
}

# wait_tcp NS HOST PORT [SECONDS]: until a TCP connect from NS succeeds.
wait_tcp() {
    WAIT_IN=$1 wait_port "$2" "$3" "${4:-10}"
}

# wait_file FILE [SECONDS]: until FILE exists and is not empty.
wait_file() {
    local i
    for i in $(seq $((${2:-10} * 20))); do
        [ -s "$1" ] && return 0
        sleep 0.05
    done
    return 1
}

# ---------------------------------------------------------------- servers

# Files nginx serves: small (text) and 1m.bin; their digests in SHA_SMALL,
# SHA_1M. big_file SIZE_MIB makes big.bin (SHA_BIG) on demand.
www_files() {
    printf 'hello from the tun e2e server\n' >"$WWW/small"
    head -c 1048576 /dev/urandom >"$WWW/1m.bin"
    SHA_SMALL=$(sha_file "$WWW/small")
    SHA_1M=$(sha_file "$WWW/1m.bin")
}

big_file() {
    BIG_SIZE=$(($1 * 1048576))
    if command -v openssl >/dev/null 2>&1; then
        # An AES-CTR keystream (fresh key per run) is random enough for a
        # digest check and ~4x faster than /dev/urandom here.
        # (openssl dies of SIGPIPE when head has enough: not a failure)
        SHA_BIG=$(set +o pipefail; openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:$$.$RANDOM.$RANDOM" \
            </dev/zero 2>/dev/null | head -c "$BIG_SIZE" | tee "$WWW/big.bin" | sha256_stream)
    else
        head -c "$BIG_SIZE" /dev/urandom >"$WWW/big.bin"
        SHA_BIG=$(sha256_stream <"$WWW/big.bin")
    fi
    [ "$(stat -c %s "$WWW/big.bin")" = "$BIG_SIZE" ] || fail "big.bin: short write"
}

# sha256_stream: the sha256 (hex) of stdin; openssl's uses the CPU's SHA
# instructions where sha256sum does not.
sha256_stream() {
    if command -v openssl >/dev/null 2>&1; then
        openssl dgst -sha256 -r | cut -d' ' -f1
    else
        sha256sum | cut -d' ' -f1
    fi
}

# nginx (Debian's nginx-light) in the server namespace on :80 and :8080,
# v4 and v6, as root with every path in the temp dir. /slow/ serves the
# same files at 2 MiB/s per connection.
server_http() {
    need_cmd nginx
    www_files
    mkdir -p "$NETNS_TMP/nginx"
    cat >"$NETNS_TMP/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 8192;
pid $NETNS_TMP/nginx.pid;
error_log $NETNS_TMP/nginx-error.log warn;
events { worker_connections 4096; }
http {
    default_type application/octet-stream;
    log_format e2e '\$remote_addr \$request_method \$uri \$status \$body_bytes_sent srv=\$server_addr:\$server_port';
    access_log $NETNS_TMP/access.log e2e;
    client_body_temp_path $NETNS_TMP/nginx/body;
    proxy_temp_path $NETNS_TMP/nginx/proxy;
    fastcgi_temp_path $NETNS_TMP/nginx/fastcgi;
    uwsgi_temp_path $NETNS_TMP/nginx/uwsgi;
    scgi_temp_path $NETNS_TMP/nginx/scgi;
    sendfile on;
    keepalive_timeout 60s;
    server {
        listen $SRV4:$HTTP_PORT backlog=4096;
        listen [$SRV6]:$HTTP_PORT backlog=4096;
        listen $SRV4:$ALT_PORT;
        listen [$SRV6]:$ALT_PORT;
        server_name _;
        root $WWW;
        location /slow/ { alias $WWW/; limit_rate 2m; }
    }
}
EOF
    bg_in "$NS_SRV" "$NETNS_TMP/nginx-error.log" nginx -p "$NETNS_TMP/nginx" \
        -c "$NETNS_TMP/nginx.conf" -e "$NETNS_TMP/nginx-error.log"
    wait_tcp "$NS_SRV" "$SRV4" "$HTTP_PORT" 10 || fail "nginx did not start"
}

# A UDP echo on :7 (v4 and v6): every datagram goes back as it came.
server_udp() {
    cat >"$NETNS_TMP/udp-echo.py" <<'PY'
import selectors, socket, sys
sel = selectors.DefaultSelector()
for fam, host in ((socket.AF_INET, sys.argv[1]), (socket.AF_INET6, sys.argv[2])):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((host, int(sys.argv[3])))
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
open(sys.argv[4], "w").write("ready\n")
while True:
    for key, _ in sel.select():
        try:
            data, peer = key.fileobj.recvfrom(65535)
            key.fileobj.sendto(data, peer)
        except OSError:
            pass
PY
    bg_in "$NS_SRV" "$NETNS_TMP/udp-echo.log" "$PY" "$NETNS_TMP/udp-echo.py" \
        "$SRV4" "$SRV6" "$ECHO_PORT" "$NETNS_TMP/udp-echo.ready"
    wait_file "$NETNS_TMP/udp-echo.ready" 10 || fail "the UDP echo did not start"
}

# dnsmasq (dnsmasq-base) on the server's address: test.example -> $SRV4,
# nothing forwarded, no hosts file.
server_dns() {
    need_cmd dnsmasq
    bg_in "$NS_SRV" "$NETNS_TMP/dnsmasq.log" dnsmasq --keep-in-foreground \
        --conf-file=/dev/null --no-resolv --no-hosts --user=root --group=root \
        --listen-address="$SRV4" --bind-interfaces --port="$DNS_PORT" \
        --address=/test.example/"$SRV4" --pid-file="$NETNS_TMP/dnsmasq.pid" \
        --log-facility="$NETNS_TMP/dnsmasq.log"
    wait_file "$NETNS_TMP/dnsmasq.pid" 10 || fail "dnsmasq did not start"
}

# iperf3 -s -D on :5201; the daemon's pid is read from its pidfile.
server_iperf() {
    need_cmd iperf3
    srv iperf3 -s -D -p "$IPERF_PORT" --pidfile "$NETNS_TMP/iperf3.pid" \
        --logfile "$NETNS_TMP/iperf3.log" || fail "iperf3 -s -D failed"
    wait_file "$NETNS_TMP/iperf3.pid" 10 || fail "iperf3 wrote no pidfile"
    NETNS_PIDS+=("$(tr -dc 0-9 <"$NETNS_TMP/iperf3.pid")")
    wait_tcp "$NS_SRV" "$SRV4" "$IPERF_PORT" 10 || fail "iperf3 does not accept"
}

servers_start() {
    local s
    [ $# -gt 0 ] || set -- http udp dns iperf
    for s in "$@"; do
        "server_$s"
    done
}

# ---------------------------------------------------------------- chute

# tun_bundle [EXTRA_CONFIG_LUA] < route code: writes $BUNDLE/main.lua with
# the TUN config (auto_route on; TUN_EXTRA adds fields to tun = {...}) and
# the code given. Written beside and
# renamed, so a reload never reads half a file.
tun_bundle() {
    {
        cat <<EOF
local chute = require "chute"
chute.config {
  log_level = "info",
  fallback = "DIRECT",
  tun = { name = "$TUN_DEV", address = { "198.19.0.1/30", "fdfe::1/126" },
          mtu = 1500, auto_route = true${TUN_EXTRA:+, $TUN_EXTRA} },
  timeouts = { connect = 5, idle = 60, udp = 30 },
${1:-}
}
EOF
        cat
    } >"$BUNDLE/main.lua.new"
    mv "$BUNDLE/main.lua.new" "$BUNDLE/main.lua"
}

# tun_rules_present: 0 if the v4 and the v6 capture rules (prio 9001) are in.
tun_rules_present() {
    [ -n "$(ip -n "$NS_CLI" -4 rule show priority 9001 2>/dev/null)" ] &&
        [ -n "$(ip -n "$NS_CLI" -6 rule show priority 9001 2>/dev/null)" ]
}

tun_chute_start() {
    if [ -n "${CHUTE_VIA_HOST:-}" ]; then
        # CHUTE_VIA_HOST=1: the suite's chute is examples/embed/host, which
        # the system's device and routes serve (spec/e2e/embed/host.bash).
        # shellcheck source=embed/host.bash
        . "$(dirname "${BASH_SOURCE[0]}")/embed/host.bash"
        ip -n "$NS_CLI" link show dev "$TUN_DEV" >/dev/null 2>&1 || embed_tun_up
        embed_host_start
        return
    fi
    [ -s "$CHUTE_LOG" ] && mv "$CHUTE_LOG" "$CHUTE_LOG.prev"
    : >"$CHUTE_LOG"
    # shellcheck disable=SC2086 # CHUTE_RUN_ARGS: words ("--log-level debug")
    ip netns exec "$NS_CLI" "$CHUTE" run ${CHUTE_RUN_ARGS:-} "$BUNDLE" >>"$CHUTE_LOG" 2>&1 &
    CHUTE_PID=$!
    local i
    for i in $(seq 200); do
        kill -0 "$CHUTE_PID" 2>/dev/null || chute_alive
        if ip -n "$NS_CLI" link show dev "$TUN_DEV" 2>/dev/null | grep -q '[<,]UP[,>]' &&
            tun_rules_present && grep -q "tun $TUN_DEV: up" "$CHUTE_LOG"; then
            return 0
        fi
        sleep 0.05
    done
    fail "chute's TUN $TUN_DEV is not up with its rules after 10 s"
}

tun_env_up() {
    netns_setup
    servers_start "$@"
    [ -f "$BUNDLE/main.lua" ] || tun_bundle <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
    tun_chute_start
}

# ---------------------------------------------------------------- stats

# stats_read [PREFIX]: SIGUSR1, wait for both new "stats" lines, and set
# PREFIX_<key> (default S_<key>) for every key=value in them. drops=a/b/c/d/e/f
# also gives PREFIX_drops_truncated, _version, _length, _fragment, _proto,
# _l4 and PREFIX_drops_sum.
STATS_KEYS=()
stats_read() {
    local pfx=${1:-S} before n i
    before=$(grep -c -E ' stats (flows_active|tun )' "$CHUTE_LOG" || true)
    kill -USR1 "$CHUTE_PID" 2>/dev/null || chute_alive
    for i in $(seq 100); do
        n=$(grep -c -E ' stats (flows_active|tun )' "$CHUTE_LOG" || true)
        [ "$n" -ge $((before + 2)) ] && break
        sleep 0.05
    done
    [ "$n" -ge $((before + 2)) ] || fail "stats_read: no new stats lines 5 s after SIGUSR1"
    stats_parse "$pfx"
}

# stats_parse [PREFIX]: the same from the newest lines already in the log
# (the ones chute writes at exit, say).
stats_parse() {
    local pfx=${1:-S} line kv k v
    STATS_KEYS=()
    for line in "$(grep -E ' stats flows_active=' "$CHUTE_LOG" | tail -n 1)" \
        "$(grep -E ' stats mitm ' "$CHUTE_LOG" | tail -n 1)" \
        "$(grep -E ' stats tun ' "$CHUTE_LOG" | tail -n 1)"; do
        for kv in $(grep -o -E '[a-z_0-9]+=[^ ]+' <<<"$line"); do
            k=${kv%%=*}
            v=${kv#*=}
            if [ "$k" = drops ]; then
                local d parts
                IFS=/ read -r -a parts <<<"$v"
                local names=(truncated version length fragment proto l4) sum=0 j
                for j in 0 1 2 3 4 5; do
                    d=${parts[$j]:-0}
                    printf -v "${pfx}_drops_${names[$j]}" '%s' "$d"
                    sum=$((sum + d))
                done
                printf -v "${pfx}_drops_sum" '%s' "$sum"
            fi
            printf -v "${pfx}_$k" '%s' "$v"
            STATS_KEYS+=("$k")
        done
    done
}

# ---------------------------------------------------------------- helpers

# cli_py ARGS... < script: python3 in the client namespace.
cli_py() { ip netns exec "$NS_CLI" "$PY" - "$@"; }
srv_py() { ip netns exec "$NS_SRV" "$PY" - "$@"; }

# cli_curl ARGS...: curl in the client namespace (through the TUN).
cli_curl() { ip netns exec "$NS_CLI" curl --silent --show-error "$@"; }

# cli_fetch_sha ARGS...: sha256 of a body fetched through the TUN; fails on
# any curl error.
cli_fetch_sha() {
    local out rc=0
    out=$(ip netns exec "$NS_CLI" curl --silent --show-error --fail --max-time 120 "$@" |
        sha256_stream) || rc=$?
    [ "$rc" -eq 0 ] || fail "curl $* failed (pipeline status $rc)"
    echo "$out"
}

# route_via_tun ADDR: the client namespace sends unmarked ADDR into the TUN.
assert_routed_via_tun() {
    local got
    got=$(ip -n "$NS_CLI" route get "$1" 2>&1)
    assert_match "dev $TUN_DEV" "$got" "$1 is routed into the TUN in $NS_CLI"
    got=$(ip -n "$NS_CLI" route get "$1" mark "$TUN_MARK" 2>&1)
    assert_match "dev veth0" "$got" "$1 with chute's mark leaves through veth0"
}

# The rule= of a flow decided by route(), directly or from the decision
# cache (rule="route (cached)": a new flow to a destination already decided).
RULE_RE='rule="route( \(cached\))?"'

# assert_decided_once [PREFIX]: every flow was decided exactly once, by
# route() or by the decision cache: route_calls + dcache_hits == flows_total.
assert_decided_once() {
    local p=${1:-S} rc dh ft
    rc=${p}_route_calls dh=${p}_dcache_hits ft=${p}_flows_total
    assert_eq "${!ft}" "$((${!rc} + ${!dh:-0}))" \
        "each flow decided once: route_calls (${!rc}) + dcache_hits (${!dh:-0}) == flows_total"
}

pass() { say "PASS${1:+ ($1)}"; exit 0; }
