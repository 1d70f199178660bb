#!/usr/bin/env bash
# 200 concurrent SOCKS5 downloads and 50 concurrent HTTP-proxy downloads of
# a 1 MiB file: every body right, 250 flows logged, no warn/error lines.
. "$(dirname "$0")/../lib.sh"

e2e_init
origin_start
bundle_write <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
chute_start

N_SOCKS=200
N_HTTP=50

# parallel_fetch NAME N PROXY_ARGS...: one curl running N transfers at once.
# "Connection: close" stops curl from reusing a finished connection for a
# later transfer, so there is exactly one proxied connection per transfer.
parallel_fetch() {
    local name=$1 n=$2 i
    shift 2
    mkdir -p "$E2E_TMP/$name"
    for i in $(seq "$n"); do
        printf 'url = "http://127.0.0.1:%s/1m.bin?%s=%d"\noutput = "%s/%s/%d"\n' \
            "$ORIGIN_PORT" "$name" "$i" "$E2E_TMP" "$name" "$i"
    done >"$E2E_TMP/$name.curlrc"
    curl --silent --show-error --fail --max-time 120 --parallel --parallel-immediate \
        --parallel-max "$n" -H 'Connection: close' "$@" -K "$E2E_TMP/$name.curlrc" \
        2>"$E2E_TMP/$name.err"
}

# check_bodies NAME N: all N outputs exist and are the 1 MiB file.
check_bodies() {
    local name=$1 n=$2 good
    check "$n $name bodies have the 1 MiB file's sha256"
    good=$(cd "$E2E_TMP/$name" && sha256sum -- * 2>/dev/null | awk -v s="$SHA_1M" '$1 == s' | wc -l)
    [ "$good" -eq "$n" ] || fail "$name: $good of $n bodies are right"
}

say "$N_SOCKS parallel downloads through SOCKS5 and $N_HTTP through the HTTP proxy, at the same time"
start=$(now)
parallel_fetch socks "$N_SOCKS" -x "socks5://127.0.0.1:$SOCKS_PORT" &
socks_job=$!
parallel_fetch http "$N_HTTP" -x "http://127.0.0.1:$HTTP_PORT" &
http_job=$!
socks_rc=0 http_rc=0
wait "$socks_job" || socks_rc=$?
wait "$http_job" || http_rc=$?
say "transfers done in $(elapsed "$start")s"

# SOCKS5 first: its checks stand on their own if the HTTP side fails.
check "curl --parallel through SOCKS5 exits 0"
[ "$socks_rc" -eq 0 ] || { grep 'curl:' "$E2E_TMP/socks.err" | head -n 5 >&2; fail "socks curl exit $socks_rc"; }
check_bodies socks "$N_SOCKS"
n=$(wait_log_count "flow [0-9]+ tcp socks .* -> 127\.0\.0\.1:$ORIGIN_PORT policy=DIRECT" "$N_SOCKS")
assert_eq "$N_SOCKS" "$n" "SOCKS5 flows logged"
# Not exact (it depends on timing), but far above what a serialized relay
# would reach: proof that the flows really overlapped.
peak=$(peak_flows "socks ")
assert_ge 50 "$peak" "SOCKS5 flows open at once: $peak (from the log's close times and durations)"

check "curl --parallel through the HTTP proxy exits 0"
[ "$http_rc" -eq 0 ] || { grep 'curl:' "$E2E_TMP/http.err" | head -n 5 >&2; fail "http curl exit $http_rc"; }
check_bodies http "$N_HTTP"
n=$(wait_log_count "flow [0-9]+ tcp http .* -> 127\.0\.0\.1:$ORIGIN_PORT policy=DIRECT" "$N_HTTP")
assert_eq "$N_HTTP" "$n" "HTTP proxy flows logged"

assert_eq $((N_SOCKS + N_HTTP)) "$(log_count 'flow [0-9]+ tcp ')" "closed flows in all"
n=$(count_flows_down_ge "" 1048576)
assert_eq $((N_SOCKS + N_HTTP)) "$n" "every flow carried >= 1 MiB down"
assert_no_log '^[0-9-]+ [0-9:.]+ (error|warn) ' "no error or warn lines in chute's log"

e2e_pass
