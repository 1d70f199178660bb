# scripts/bench/tun --hev PATH: hev-socks5-tunnel beside chute on the
# no-offload path (sourced by scripts/bench/tun; never run alone).
#
# Both relay to one SOCKS5 server (spec/bench/splice_socks5.c, built here:
# splice(2) between the sockets, a thread per direction: it copies nothing,
# so it sets the least bound) on 10.200.0.3:1080 in the server namespace,
# which connects to iperf3 there.
# hev has no offload: its TUN (MTU 1500) hands one MTU-sized packet per
# read, the path a NetworkExtension host has; chute runs with
# tun.offload = false and route() returning the SOCKS5 policy. Captured
# traffic: hev's rows route 10.200.0.2/32 into hev's TUN (the SOCKS5 server's
# address stays on the veth); chute's use its own auto_route.
# Per run: the veth baseline, hev, then chute (each build), up/down/8 flows.
# Transfers here last HEV_DUR (at least 8 s) and CPU is read from 2 s on:
# on this path chute and hev take a second or more to reach their steady
# rate of CPU (a 3-s transfer read 58-66% of a core for both where 8 s read
# 85-100%), and what their CPU per Gbit/s compares is the steady part.

HEV_SOCKS4=10.200.0.3 HEV_SOCKS_PORT=1080 HEV_TUN="bt$$h" HEV_PID=""
HEV_DUR=$((DUR > 8 ? DUR : 8))
CHUTE_PROXY_LUA="chute.proxy \"s5\" { type = \"socks5\", server = \"$HEV_SOCKS4\", port = $HEV_SOCKS_PORT }"

hev_setup() {
    [ -x "$HEV_BIN" ] || fail "--hev $HEV_BIN: not an executable"
    cc -O2 -pthread -o "$TMP/splice_socks5" "$CHUTE_TOP/spec/bench/splice_socks5.c" >"$TMP/splice_socks5-cc.log" 2>&1 ||
        fail "building spec/bench/splice_socks5.c: $(head -n 5 "$TMP/splice_socks5-cc.log")"
    ip -n "$NS_S" addr add "$HEV_SOCKS4/24" dev veth1
    ip netns exec "$NS_S" "$TMP/splice_socks5" "$HEV_SOCKS4" "$HEV_SOCKS_PORT" >"$TMP/splice_socks5.log" 2>&1 &
    PIDS+=($!)
    wait_tcp "$NS_C" "$HEV_SOCKS4" "$HEV_SOCKS_PORT" || fail "the splice SOCKS5 server did not start"
}

hev_start() {
    cat >"$TMP/hev.yml" <<EOF
tunnel:
  name: $HEV_TUN
  mtu: 1500
  ipv4: 198.18.0.1
socks5:
  port: $HEV_SOCKS_PORT
  address: $HEV_SOCKS4
misc:
  log-level: warn
EOF
    ip netns exec "$NS_C" "$HEV_BIN" "$TMP/hev.yml" >"$TMP/logs/hev.log" 2>&1 &
    HEV_PID=$!
    local i
    for i in $(seq 100); do
        ip -n "$NS_C" link show dev "$HEV_TUN" 2>/dev/null | grep -q ',UP' && break
        kill -0 "$HEV_PID" 2>/dev/null || fail "hev died: $(tail -n 3 "$TMP/logs/hev.log")"
        sleep 0.05
    done
    ip -n "$NS_C" route add "$SRV4/32" dev "$HEV_TUN" || fail "hev: no route into $HEV_TUN: $(tail -n 3 "$TMP/logs/hev.log")"
    cli ip route get "$SRV4" | grep -q "dev $HEV_TUN" || fail "hev: $SRV4 is not routed into $HEV_TUN"
}

hev_stop() {
    [ -n "$HEV_PID" ] || return 0
    ip -n "$NS_C" route del "$SRV4/32" dev "$HEV_TUN" 2>/dev/null || true
    kill_wait "$HEV_PID"
    HEV_PID=""
}

# What went through hev's TUN (bytes both ways), for the "went through" check.
hev_tun_bytes() {
    local d=/sys/class/net/$HEV_TUN/statistics
    ip netns exec "$NS_C" sh -c "echo \$((\$(cat $d/rx_bytes) + \$(cat $d/tx_bytes)))"
}

# One run of the comparison (run number R).
hev_run() {
    local r=$1 b mode DUR=$HEV_DUR CPU_SKIP=2 # seen by iperf_run
    veth_mtu 1500
    for mode in up down p8; do iperf_run "$mode" "hev.base.$mode"; done
    hev_start
    for mode in up down p8; do iperf_run "$mode" "hev.hev.$mode"; done
    hev_stop
    for b in $BUILDS; do
        CHUTE_POLICY=s5 chute_start "$b:off" 1500 "$b-socks5-noTSO-run$r"
        for mode in up down p8; do iperf_run "$mode" "hev.$b.$mode"; done
        chute_stop
    done
}

hev_report() {
    local mode k g bg hg cpu b mc hm
    printf '\nbeside hev-socks5-tunnel (%s), MTU 1500, no offload, both relaying to one splice SOCKS5 server;\n' "$HEV_BIN"
    printf '%s s per transfer, CPU (CPU%%, mach%%) read from 2 s on, once both are at their steady rate;\n' "$HEV_DUR"
    printf 'ratio = to the veth of these runs; x hev = Gbit/s over hev'"'"'s; target 8 flows >= 2 x hev;\n'
    printf 'm/Gb = the whole machine'"'"'s CPU%% per Gbit/s (the kernel'"'"'s work for iperf3 and the SOCKS server too);\n'
    printf 'x max = the x hev that all cores busy would give at these m/Gb (hev'"'"'s m/Gb over chute'"'"'s):\n'
    printf '%-31s %8s %6s %6s %6s %6s %6s %7s %6s  %s\n' "" Gbit/s ratio CPU% %/Gb mach% m/Gb "x hev" "x max" runs
    for mode in up down p8; do
        bg=$(med "hev.base.$mode.gbps" || true) hg=$(med "hev.hev.$mode.gbps" || true)
        hm=$(per_gbit "$(med "hev.hev.$mode.mach" || true)" "$hg")
        printf '%-31s %8s %6s %6s %6s %6s %6s %7s %6s  %s\n' "veth $(mode_name $mode)" "$(fmt "$bg" %.2f)" - - - \
            "$(fmt "$(med "hev.base.$mode.mach" || true)" %.0f)" "$(per_gbit "$(med "hev.base.$mode.mach" || true)" "$bg")" \
            - - "${RES[hev.base.$mode.gbps]:-}"
        for k in hev $BUILDS; do
            # A run that failed left no value: med then finds none.
            g=$(med "hev.$k.$mode.gbps" || true) cpu=$(med "hev.$k.$mode.cpu" || true)
            mc=$(med "hev.$k.$mode.mach" || true)
            local x=- t="" xm=-
            if [ "$k" = hev ]; then
                b="hev"
            else
                b="chute $k noTSO s5" x=$(ratio "$g" "$hg") xm=$(ratio "$hm" "$(per_gbit "$mc" "$g")")
            fi
            if [ "$k" != hev ] && [ "$mode" = p8 ]; then
                t=$(verdict ge "$x" 2)
                [ "$t" = ok ] || missed=$((missed + 1))
                t=" >=2 $t"
            fi
            printf '%-31s %8s %6s %6s %6s %6s %6s %7s %6s  %s\n' "$b $(mode_name $mode)" "$(fmt "$g" %.2f)" \
                "$(ratio "$g" "$bg")" "$(fmt "$cpu" %.0f)" "$(per_gbit "$cpu" "$g")" "$(fmt "$mc" %.0f)" \
                "$(per_gbit "$mc" "$g")" "$x$t" "$xm" "${RES[hev.$k.$mode.gbps]:-}"
        done
    done
}

# hev_check KEY BYTES TUN_BYTES_BEFORE (from iperf_run, whose c0/c1/t0/t1
# it reads): hev's CPU; the transfer must have crossed hev's TUN.
hev_check() {
    local moved=$(($(hev_tun_bytes) - $3))
    [ "$moved" -ge $(($2 * 9 / 10)) ] || fail "$1: did not go through hev: its TUN moved $moved bytes, iperf3 $2"
    kill -0 "$HEV_PID" 2>/dev/null || fail "hev died: $(tail -n 3 "$TMP/logs/hev.log")"
    add "$1.cpu" "$(awk -v a="$c0" -v b="$c1" -v s="$t0" -v e="$t1" -v hz="$CLK_TCK" \
        'BEGIN { printf "%.0f", (b - a) / hz / (e - s) * 100 }')"
}
