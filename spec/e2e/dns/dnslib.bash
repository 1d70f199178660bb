# shellcheck shell=bash
# Helpers for the DNS tests (spec/e2e/dns/NN-name.sh): loopback ones without
# root first, then the TUN ones (root, netns.sh) at the end.
# Not a test itself: the name does not end in .sh, so ctest leaves it alone.
# Source it after lib.sh, then:
#
#   dns_init                     e2e_init + DNS_PORT (chute's dns.listen) and
#                                UP_PORT (dnsmasq) from lib.sh's e2e_ports
#   upstream_start [ARGS...]     dnsmasq on 127.0.0.1:$UP_PORT answering
#                                test.example (and below) with 10.1.2.3 (AAAA:
#                                NODATA, not REFUSED: --local), every
#                                query logged to $UP_LOG; ARGS are added
#   dns_bundle FIELDS < LUA      main.lua: lib.sh's header with
#                                dns = { listen, upstream, state_file, FIELDS }
#   dns_chute_start              chute_start + chute's DNS port accepts TCP
#   dq NAME [TYPE] [DIG_ARGS...] dig at chute: +short answers (sorted)
#   dfull NAME [TYPE] [DIG...]   dig at chute: the whole answer, with comments
#   dstats [PREFIX]              SIGUSR1; the new "stats" line's key=value
#                                pairs become PREFIX_key (default S_key)
#   up_queries NAME [TYPE]       how many queries for NAME (of TYPE) dnsmasq got
#   ttl_floor TTL START MIN      the lowest TTL a cached answer may show by now
#
# Everything runs on 127.0.0.1 as whoever runs the test; the processes are
# registered in E2E_EXTRA_PIDS, so lib.sh's cleanup stops them (and only them).

dns_init() {
    need_cmd dig dnsmasq
    e2e_init
    local ports
    ports=$(e2e_ports 2) || fail "e2e_ports: no 2 free ports for DNS"
    read -r DNS_PORT UP_PORT <<<"$ports"
    UP_LOG=$E2E_TMP/dnsmasq.log
    STATE=$E2E_TMP/fakeip.state
}

upstream_start() {
    : >"$UP_LOG"
    dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts \
        --user="$(id -un)" --group="$(id -gn)" \
        --listen-address=127.0.0.1 --bind-interfaces --port="$UP_PORT" \
        --pid-file="$E2E_TMP/dnsmasq.pid" --log-queries --log-facility="$UP_LOG" \
        --address=/test.example/10.1.2.3 --local=/test.example/ "$@" 2>>"$UP_LOG" &
    E2E_EXTRA_PIDS+=("$!")
    local i
    for i in $(seq 100); do
        dig @127.0.0.1 -p "$UP_PORT" test.example +short +time=1 +tries=1 2>/dev/null |
            grep -q 10.1.2.3 && break
        kill -0 "$!" 2>/dev/null || fail "dnsmasq exited: $(tail -n 3 "$UP_LOG")"
        sleep 0.05
    done
    [ "$i" -lt 100 ] || fail "dnsmasq on 127.0.0.1:$UP_PORT does not answer"
    : >"$UP_LOG" # the probe above does not count
}

dns_bundle() {
    bundle_write "  dns = { listen = \"127.0.0.1:$DNS_PORT\", upstream = { \"127.0.0.1:$UP_PORT\" },
          state_file = \"$STATE\", timeout = 1, ${1:-} },"
}

dns_chute_start() {
    chute_start
    wait_port 127.0.0.1 "$DNS_PORT" 10 || { chute_alive; fail "chute's DNS listener does not accept"; }
}

dq() {
    local name=$1 type=${2:-A}
    shift 2 2>/dev/null || shift $#
    dig @127.0.0.1 -p "$DNS_PORT" "$name" "$type" +short "${DIG_WAIT[@]}" "$@" 2>&1 | sort
}

dfull() {
    local name=$1 type=${2:-A}
    shift 2 2>/dev/null || shift $#
    dig @127.0.0.1 -p "$DNS_PORT" "$name" "$type" "${DIG_WAIT[@]}" "$@" 2>&1
}

# ttl_floor TTL START MIN: the lowest TTL an answer cached with TTL at
# START (a `now`) may show by now: TTL - 1 - the whole seconds since, or
# MIN when that is lower. A slow run (a sanitizer build, a loaded machine)
# widens the bound; a fast one keeps MIN.
ttl_floor() {
    awk -v t="$1" -v s="$2" -v e="$(now)" -v m="$3" \
        'BEGIN { a = e - s; c = int(a); if (c < a) c++; f = t - 1 - c; print (f < m ? f : m) }'
}

# The status word of a full dig answer ("NOERROR", "NXDOMAIN", ...).
dstatus() { sed -n -E 's/.*status: ([A-Z]+),.*/\1/p' <<<"$1" | head -n 1; }

# The TTL of the first answer record of a full dig answer.
dttl() { awk '/^;; ANSWER SECTION:/ { getline; print $2; exit }' <<<"$1"; }

dstats() {
    local pfx=${1:-S} before n i line kv
    before=$(grep -c -E ' stats flows_active=' "$CHUTE_LOG" || true)
    kill -USR1 "$CHUTE_PID" 2>/dev/null || chute_alive
    for i in $(seq 100); do
        n=$(grep -c -E ' stats flows_active=' "$CHUTE_LOG" || true)
        [ "$n" -gt "$before" ] && break
        sleep 0.05
    done
    [ "$n" -gt "$before" ] || fail "dstats: no new stats line 5 s after SIGUSR1"
    line=$(grep -E ' stats flows_active=' "$CHUTE_LOG" | tail -n 1)
    for kv in $(grep -o -E '[a-z_0-9]+=[^ ]+' <<<"$line"); do
        printf -v "${pfx}_${kv%%=*}" '%s' "${kv#*=}"
    done
}

up_queries() {
    local pat="] $1 from "
    [ -n "${2:-}" ] && pat="query[$2] $1 from "
    grep -c -F -- "$pat" "$UP_LOG" 2>/dev/null || true
}

# in_net IP CIDR: 0 if IP lies in CIDR.
in_net() {
    python3 -c 'import ipaddress, sys; sys.exit(ipaddress.ip_address(sys.argv[1]) not in ipaddress.ip_network(sys.argv[2]))' "$1" "$2" 2>/dev/null
}

assert_in_net() {
    local ip=$1 net=$2 msg=$3
    check "$msg"
    in_net "$ip" "$net" || fail "$msg: '$ip' is not in $net"
}

# ---------------------------------------------------------------- TUN (root)
# For tests that source netns.sh instead of lib.sh:
#
#   ns_dnsmasq TTL [ARGS...]   dnsmasq in $NS_SRV on $SRV4:53: test.example
#                              (and below) -> $SRV4 with TTL, AAAA NODATA,
#                              every query logged to $NS_DNS_LOG
#   ns_resolv NS ADDR          /etc/netns/NS/resolv.conf: "nameserver ADDR"
#                              (ip netns exec mounts it over /etc/resolv.conf);
#                              removed by the cleanup
#   ns_up_queries NAME TYPE FROM   queries for NAME of TYPE from FROM in the log
#
# A resolver address nothing answers but chute: 192.0.2.53 (TEST-NET-1) is
# routed into the TUN like everything else.
FAKE_RESOLVER=192.0.2.53
NS_RESOLV_DIRS=()

ns_dnsmasq() {
    need_cmd dnsmasq
    local ttl=$1
    shift
    NS_DNS_LOG=$NETNS_TMP/dnsmasq.log
    bg_in "$NS_SRV" "$NS_DNS_LOG" dnsmasq --keep-in-foreground \
        --conf-file=/dev/null --no-resolv --no-hosts --user=root --group=root \
        --listen-address="$SRV4" --bind-interfaces --port=53 \
        --address=/test.example/"$SRV4" --local=/test.example/ --local-ttl="$ttl" \
        --pid-file="$NETNS_TMP/dnsmasq.pid" --log-queries --log-facility="$NS_DNS_LOG" "$@"
    wait_file "$NETNS_TMP/dnsmasq.pid" 10 || fail "dnsmasq did not start"
}

ns_resolv() {
    local dir=/etc/netns/$1
    [ -d /etc/netns ] || NS_RESOLV_TOP=1
    if [ ! -d "$dir" ]; then
        mkdir -p "$dir"
        NS_RESOLV_DIRS+=("$dir")
    fi
    printf 'nameserver %s\noptions timeout:2 attempts:2\n' "$2" >"$dir/resolv.conf"
    NS_RESOLV_FILES+=("$dir/resolv.conf")
}

ns_up_queries() {
    grep -c -F "query[$2] $1 from $3" "$NS_DNS_LOG" 2>/dev/null || true
}

# netns.sh's cleanup, plus the /etc/netns files this run wrote. Call once,
# after netns_setup.
ns_dns_cleanup_hook() {
    eval "netns_$(declare -f netns_cleanup)"
    netns_cleanup() {
        local rc=$? f
        set +e # (exit "$rc") below must not end the trap
        for f in "${NS_RESOLV_FILES[@]}"; do rm -f "$f"; done
        for f in "${NS_RESOLV_DIRS[@]}"; do rmdir "$f" 2>/dev/null; done
        [ -n "$NS_RESOLV_TOP" ] && rmdir /etc/netns 2>/dev/null # if empty: others may use it
        (exit "$rc")
        netns_netns_cleanup
    }
}
NS_RESOLV_FILES=()
NS_RESOLV_TOP=""
