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

wait_stopped() {
    for _ in $(seq $((${2:-5} * 20))); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.05
    done
    return 1
}

