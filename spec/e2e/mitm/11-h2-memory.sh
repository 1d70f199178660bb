#!/usr/bin/env bash
# HTTP/2 body memory across every session (root): with mitm.max_buffered
# at 1 MiB, 4 client connections x 8 streams read 1 MiB objects slowly
# (curl --limit-rate) from a fast h2 origin (mitmlib's nginx on :4473).
# Windows alone would let chute hold a stream window (256 KiB) per
# stream, 8 MiB; with the cap every session announces a narrower stream
# window (SETTINGS), every object arrives sha256-equal, and the narrowing
# is counted. Bytes a wider window let in stay until they drain, so what
# chute holds depends on how the connections overlap: all at once, about
# 1 MiB (0.9-1.1 in quiet runs); one after another (a loaded machine),
# more (1.6 MiB in one CI run). The bound is 32 streams opened one by one, each
# with the window of its moment: 4 x 256 + 4 x 128 + 8 x 64 + 16 x 32 KiB
# = 2.5 MiB, against 8 MiB for the windows alone.
. "$(dirname "$0")/mitmlib.bash"
need_root
H2=4473
CAP=1048576
mitm_env_up "  mitm = { hosts = { \"test.example:$H2\" }, max_buffered = $CAP }," <<'LUA'
function chute.route(flow)
  return "DIRECT"
end
LUA
head -c $((1 << 20)) /dev/urandom >"$WWW/1m.bin"
SHA_1M=$(sha_file "$WWW/1m.bin")

say "32 slow streams on 4 connections"
pids=()
for c in 1 2 3 4; do
    args=()
    for s in 1 2 3 4 5 6 7 8; do
        args+=(-o "$NETNS_TMP/got-$c-$s" "https://test.example:$H2/1m.bin?c=$c&s=$s")
    done
    ip netns exec "$NS_CLI" curl --http2 --silent --show-error --max-time 60 --cacert "$CHUTE_CA" \
        --resolve "test.example:$H2:$SRV4" --parallel --parallel-max 8 --limit-rate 150k \
        "${args[@]}" 2>"$NETNS_TMP/curl-$c.err" &
    pids+=($!)
done
for p in "${pids[@]}"; do
    wait "$p" || fail "a slow client failed: $(cat "$NETNS_TMP"/curl-*.err)"
done
for c in 1 2 3 4; do
    for s in 1 2 3 4 5 6 7 8; do
        assert_eq "$SHA_1M" "$(sha_file "$NETNS_TMP/got-$c-$s")" "object $c/$s, whole"
    done
done
stats_read
say "held: peak $S_mitm_h2_buffered_peak bytes; windows narrowed $S_mitm_h2_windows_narrowed times"
assert_ge 4 "$S_mitm_h2_client_conns" "4 h2 client connections"
assert_ge 1 "$S_mitm_h2_windows_narrowed" "mitm_h2_windows_narrowed"
[ "$S_mitm_h2_buffered_peak" -le $((CAP * 5 / 2)) ] ||
    fail "chute held up to $S_mitm_h2_buffered_peak bytes of h2 bodies with max_buffered = $CAP"
assert_eq 0 "$S_mitm_h2_buffered_bytes" "nothing held once the streams are over"
assert_eq 0 "$S_mitm_h2_buffer_alloc" "no buffer left once the streams are over"
chute_alive
pass
