# shellcheck shell=bash
# Helpers for spec/e2e/hostile/NN-name.sh, after lib.sh (or netns.sh):
#
#   stat_of KEY...        SIGUSR1, then the values of KEYs in the newest stats lines
#   rss_kib / fd_count    chute's resident set (KiB) and open descriptors
#   baseline              remembers both (BASE_RSS, BASE_FDS) after a probe
#   assert_no_leak MIB FDS  RSS within MIB of the baseline (+256 under ASan), fds within FDS
#   flood ARGS...         python3 flood.py (the hostile clients) in the foreground
#   fault_peer MODE PORT  a faultpeer.py (broken peers) on 127.0.0.1 in the background
#   wait_file_l FILE [S]  0 once FILE is non-empty, 1 after S seconds (default 5)
#
# CHUTE_PID and CHUTE_LOG come from chute_start / tun_chute_start.

HOSTILE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

flood() { python3 "$HOSTILE_DIR/flood.py" "$@"; }

wait_file_l() { for _ in $(seq $((${2:-5} * 20))); do [ -s "$1" ] && return 0; sleep 0.05; done; return 1; }

fault_peer() {
    python3 "$HOSTILE_DIR/faultpeer.py" "$1" 127.0.0.1 "$2" "$E2E_TMP/$1.ready" >"$E2E_TMP/$1.log" 2>&1 &
    E2E_EXTRA_PIDS+=($!)
    for _ in $(seq 100); do [ -s "$E2E_TMP/$1.ready" ] && return 0; sleep 0.05; done
    fail "faultpeer $1 did not start"
}

# stat_of KEY...: one value per KEY (0 when the line lacks it), from the
# stats lines a fresh SIGUSR1 writes.
stat_of() {
    local before n i
    before=$(grep -c -E ' stats (flows_active|tun )' "$CHUTE_LOG" || true)
    kill -USR1 "$CHUTE_PID" 2>/dev/null || chute_alive
    for i in $(seq 100); do
        n=$(grep -c -E ' stats flows_active=' "$CHUTE_LOG" || true)
        [ "$n" -gt "$before" ] && break
        sleep 0.05
    done
    sleep 0.1 # the tun line follows the main one
    local lines k v
    lines="$(grep -E ' stats flows_active=' "$CHUTE_LOG" | tail -n 1 || true) $(grep -E ' stats tun ' "$CHUTE_LOG" | tail -n 1 || true)"
    for k in "$@"; do
        v=$(grep -o -E "(^| )$k=[0-9.]+" <<<"$lines" | tail -n 1 | cut -d= -f2 || true)
        echo "${v:-0}"
    done
}

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$CHUTE_PID/status"; }
fd_count() { find "/proc/$CHUTE_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }

baseline() {
    BASE_RSS=$(rss_kib)
    BASE_FDS=$(fd_count)
    say "baseline: RSS $((BASE_RSS / 1024)) MiB ($BASE_RSS KiB), $BASE_FDS descriptors"
}

# assert_no_leak MIB FDS [SECONDS]: waits up to SECONDS (default 15) for
# chute's descriptors to come back within FDS of the baseline, then checks
# RSS is within MIB MiB of it.
assert_no_leak() {
    local mib=$1 fds=$2 secs=${3:-15} i now_fds now_rss
    # ASan holds freed memory in its quarantine (256 MiB by default): under
    # it the RSS bound says only that nothing runs away.
    if grep -q -a __asan_init "$CHUTE" 2>/dev/null; then
        mib=$((mib + 256))
    fi
    for i in $(seq $((secs * 4))); do
        now_fds=$(fd_count)
        [ "$now_fds" -le $((BASE_FDS + fds)) ] && break
        sleep 0.25
    done
    now_rss=$(rss_kib)
    check "descriptors back near the baseline: $now_fds now, $BASE_FDS before (bound +$fds)"
    [ "$now_fds" -le $((BASE_FDS + fds)) ] || fail "descriptors leak: $now_fds open, $BASE_FDS before"
    check "RSS back near the baseline: $((now_rss / 1024)) MiB now, $((BASE_RSS / 1024)) MiB before (+$(((now_rss - BASE_RSS) / 1024)) MiB, bound +$mib MiB)"
    [ "$now_rss" -le $((BASE_RSS + mib * 1024)) ] ||
        fail "RSS grew: $now_rss KiB, $BASE_RSS KiB before (bound +$mib MiB)"
}
