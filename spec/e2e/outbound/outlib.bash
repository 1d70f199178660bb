# shellcheck shell=bash
# Helpers for the proxy-outbound tests (spec/e2e/outbound/NN-name.sh).
# Not a test itself: the name does not end in .sh, so ctest leaves it alone.
# Source it instead of netns.sh (it sources netns.sh), then, after
# netns_setup:
#
#   ss_start PORT CIPHER PASSWORD [ARGS...]   ss-server in the server
#                            namespace on $SRV4:PORT (ARGS: -u for UDP too);
#                            its pid in BG_PID (registered for cleanup)
#   socks_start PORT [ARGS...]     microsocks on $SRV4:PORT (-u U -P P: auth)
#   tinyproxy_start PORT [USER PASS]  tinyproxy on $SRV4:PORT, CONNECT to
#                            the nginx ports only; Basic auth with USER PASS
#                            (no spaces); TINY_EXTRA: more config lines
#   tcp_relay_start PORT TARGET_PORT [FLIP_AT]   a python TCP relay on
#                            $SRV4:PORT to $SRV4:TARGET_PORT; with FLIP_AT,
#                            byte FLIP_AT of each server -> client stream is
#                            flipped (corrupted ciphertext)
#   wait_stopped PID [SECONDS]     until PID has exited
#   delay_link_start MS_OUT MS_BACK   a second link from the client to the
#                            server namespace, 10.201.0.1 -> $DL_SRV4
#                            (10.201.0.2), through a third namespace whose
#                            user-space bridge (delaybridge.py) holds each
#                            frame back MS_OUT ms towards the server and
#                            MS_BACK ms back: tc netem's delay, which this
#                            kernel may lack (servers listening on $DL_SRV4
#                            or 0.0.0.0 are reached through it)
#   trojan_start PORT PASSWORD [ADDR]  Debian's trojan on ADDR:PORT (default
#                            $SRV4) with a
#                            self-signed certificate for trojan.test (the
#                            proxy needs skip_cert_verify), sessions
#                            resumable by ID (no tickets), nginx :80 as
#                            its fallback; its pid in TROJAN_PID. Again
#                            after kill_wait "$TROJAN_PID": a restart.
#
# Every process starts through bg_in (netns.sh), so the cleanup trap stops
# exactly the processes this run started, nothing else.

# shellcheck source=../netns.sh
. "$(dirname "${BASH_SOURCE[0]}")/../netns.sh"
# shellcheck disable=SC2034 # read by netns.sh and lib.sh
TEST_NAME=outbound/$(basename "${BASH_SOURCE[1]:-$0}" .sh)

ss_start() {
    local port=$1 cipher=$2 pass=$3
    shift 3
    need_cmd ss-server
    bg_in "$NS_SRV" "$NETNS_TMP/ss-$port.log" ss-server -s "$SRV4" -p "$port" -k "$pass" \
        -m "$cipher" -t 60 "$@"
    wait_tcp "$NS_SRV" "$SRV4" "$port" 10 || fail "ss-server ($cipher) did not start on :$port: $(tail -n 5 "$NETNS_TMP/ss-$port.log")"
}

socks_start() {
    local port=$1
    shift
    need_cmd microsocks
    bg_in "$NS_SRV" "$NETNS_TMP/microsocks-$port.log" microsocks -i "$SRV4" -p "$port" "$@"
    wait_tcp "$NS_SRV" "$SRV4" "$port" 10 || fail "microsocks did not start on :$port"
}

tinyproxy_start() {
    local port=$1 user=${2:-} pass=${3:-} conf=$NETNS_TMP/tinyproxy-$1.conf
    need_cmd tinyproxy
    {
        echo "Port $port"
        echo "Listen $SRV4"
        echo "Timeout 60"
        echo "MaxClients 100"
        echo "LogLevel Info"
        echo "Allow 0.0.0.0/0"
        echo "ConnectPort $HTTP_PORT"
        echo "ConnectPort $ALT_PORT"
        [ -n "$user" ] && echo "BasicAuth $user $pass"
        [ -n "${TINY_EXTRA:-}" ] && printf '%s\n' "$TINY_EXTRA"
    } >"$conf"
    bg_in "$NS_SRV" "$NETNS_TMP/tinyproxy-$port.log" tinyproxy -d -c "$conf"
    wait_tcp "$NS_SRV" "$SRV4" "$port" 10 || fail "tinyproxy did not start on :$port: $(tail -n 5 "$NETNS_TMP/tinyproxy-$port.log")"
}

tcp_relay_start() {
    local port=$1 target=$2 flip=${3:--1}
    cat >"$NETNS_TMP/relay.py" <<'PY'
import socket, sys, threading
host, port, target, flip = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

def pump(a, b, corrupt):
    seen = 0
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            if corrupt and seen <= flip < seen + len(d):
                d = bytearray(d)
                d[flip - seen] ^= 0x5A
                d = bytes(d)
                print(f"flipped byte {flip}", flush=True)
            seen += len(d)
            b.sendall(d)
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass

ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((host, port))
ls.listen(64)
while True:
    c, _ = ls.accept()
    u = socket.create_connection((host, target))
    threading.Thread(target=pump, args=(c, u, False), daemon=True).start()
    threading.Thread(target=pump, args=(u, c, flip >= 0), daemon=True).start()
PY
    bg_in "$NS_SRV" "$NETNS_TMP/relay-$port.log" "$PY" "$NETNS_TMP/relay.py" "$SRV4" "$port" "$target" "$flip"
    wait_tcp "$NS_SRV" "$SRV4" "$port" 10 || fail "the TCP relay did not start on :$port"
}

DL_SRV4=10.201.0.2

delay_link_start() {
    local ns="${NS_PREFIX}d" i
    ip netns del "$ns" 2>/dev/null || true
    ip netns add "$ns" || fail "ip netns add $ns"
    NETNS_MADE+=("$ns")
    ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 \
        net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1 || true
    ip -n "$NS_CLI" link add dl0 type veth peer name da netns "$ns" || fail "veth dl0"
    ip -n "$NS_SRV" link add dl1 type veth peer name db netns "$ns" || fail "veth dl1"
    ip -n "$NS_CLI" addr add 10.201.0.1/24 dev dl0
    ip -n "$NS_SRV" addr add "$DL_SRV4/24" dev dl1
    ip -n "$NS_CLI" link set dl0 up
    ip -n "$NS_SRV" link set dl1 up
    ip -n "$ns" link set da up
    ip -n "$ns" link set db up
    bg_in "$ns" "$NETNS_TMP/delaybridge.log" "$PY" "$(dirname "${BASH_SOURCE[0]}")/delaybridge.py" \
        da db "$(awk -v m="$1" 'BEGIN { print m / 1000 }')" \
        "$(awk -v m="$2" 'BEGIN { print m / 1000 }')" "$NETNS_TMP/delaybridge.ready"
    wait_file "$NETNS_TMP/delaybridge.ready" 10 || fail "the delay bridge did not start"
    for i in $(seq 50); do # the carrier, then ARP through the bridge
        ip netns exec "$NS_CLI" ping -c 1 -W 1 "$DL_SRV4" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    fail "no ping through the delay link: $(tail -n 3 "$NETNS_TMP/delaybridge.log")"
}

trojan_start() {
    local port=$1 pass=$2 addr=${3:-$SRV4} dir=$NETNS_TMP/trojan-$1
    need_cmd trojan openssl
    if [ ! -f "$dir/srv.crt" ]; then
        mkdir -p "$dir"
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=trojan.test" \
            -addext "subjectAltName=DNS:trojan.test,IP:$SRV4" -keyout "$dir/srv.key" \
            -out "$dir/srv.crt" >"$dir/openssl.log" 2>&1 || fail "openssl: $(tail -n 3 "$dir/openssl.log")"
        cat >"$dir/trojan.json" <<EOF
{
    "run_type": "server", "local_addr": "$addr", "local_port": $port,
    "remote_addr": "$SRV4", "remote_port": $HTTP_PORT, "password": ["$pass"], "log_level": 1,
    "ssl": { "cert": "$dir/srv.crt", "key": "$dir/srv.key", "key_password": "",
             "prefer_server_cipher": true, "alpn": ["http/1.1"], "reuse_session": true,
             "session_ticket": false, "session_timeout": 600, "plain_http_response": "",
             "curves": "", "dhparam": "" },
    "tcp": { "prefer_ipv4": true, "no_delay": true, "keep_alive": true, "reuse_port": false,
             "fast_open": false, "fast_open_qlen": 20 },
    "mysql": { "enabled": false }
}
EOF
    fi
    bg_in "$NS_SRV" "$dir/trojan.log" trojan -c "$dir/trojan.json"
    TROJAN_PID=$BG_PID
    wait_tcp "$NS_SRV" "$addr" "$port" 10 || fail "trojan did not start on $addr:$port: $(tail -n 5 "$dir/trojan.log")"
}

wait_stopped() {
    for _ in $(seq $((${2:-5} * 20))); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.05
    done
    return 1
}


# peer_start NAME socks5|http ADDR PORT [ARGS...]  proxypeer.py (a small
# SOCKS5 or HTTP CONNECT proxy; ARGS: --user U --pass P, --cert F --key F
# for TLS, --idle-close S) in the server namespace; its log, one
# "accept N" line per connection, in $NETNS_TMP/peer-NAME.log.
peer_start() {
    local name=$1
    shift
    bg_in "$NS_SRV" "$NETNS_TMP/peer-$name.log" "$PY" "$(dirname "${BASH_SOURCE[0]}")/proxypeer.py" \
        "$@" --ready "$NETNS_TMP/peer-$name.ready"
    wait_file "$NETNS_TMP/peer-$name.ready" 10 || fail "proxypeer $name did not start: $(tail -n 3 "$NETNS_TMP/peer-$name.log")"
}

# peer_accepts NAME: how many connections peer NAME has accepted.
peer_accepts() { grep -c '^accept ' "$NETNS_TMP/peer-$1.log" || true; }

# self_cert DIR CN: a self-signed RSA certificate DIR/srv.crt, DIR/srv.key.
self_cert() {
    mkdir -p "$1"
    [ -f "$1/srv.crt" ] && return 0
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$2" -addext "subjectAltName=DNS:$2" \
        -keyout "$1/srv.key" -out "$1/srv.crt" >"$1/openssl.log" 2>&1 || fail "openssl: $(tail -n 3 "$1/openssl.log")"
}

# pool_read NAME PREFIX: NAME's line in the newest stats block (after a
# stats_read) as shell variables PREFIX_key; fails when the block has none.
pool_read() {
    local line kv prev at
    prev=$(grep -n -E ' stats flows_active=' "$CHUTE_LOG" | tail -n 2 | head -n -1 | cut -d: -f1)
    at=$(grep -n -E " pool $1 " "$CHUTE_LOG" | tail -n 1)
    [ -n "$at" ] && [ "${at%%:*}" -gt "${prev:-0}" ] || fail "no 'pool $1' line in the newest stats"
    line=${at#*:}
    for kv in $(grep -o -E '[a-z_]+=[0-9]+' <<<"$line"); do
        printf -v "${2}_${kv%%=*}" '%s' "${kv#*=}"
    done
}

# median: the median of the numbers on stdin, one a line.
median() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
