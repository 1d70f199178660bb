#include <stdio.h>

#include "engine/budget.h"
#include "engine/engine.h"
#include "log/log.h"
#include "netstack/netstack.h"
#include "script/script.h"

/* memory_limit, split. What is not sized by a number here (code and
 * mapped libraries, thread stacks, the packet queues, allocator slack) is
 * |fixed|: measured at ~4 MiB of RSS for examples/embed/host before the
 * first flow (3.7 MiB of it file-backed: libc, libchute, Lua). The rest
 * goes by the table; a part's floor is taken from the rule sets' share
 * (the unit test checks the sum from ENGINE_BUDGET_MIN up). */

#define FIXED_BASE ((size_t)4 << 20)
#define FIXED_PER_MILLE 30 /* and this much of the limit: queues, slack */

/* Bytes one item costs, measured (scripts/bench/embed's memory row,
 * heaptrack): a TUN TCP flow is its flow (1448), netstack conn (560),
 * relay (184) and socket stream (152), with its DIRECT connect's state
 * (~700) while it opens; its data lives in lwIP's heap and the kernel's
 * socket buffers; its pcb is in the pools' share. */
#define TCP_FLOW_COST 2048
#define UDP_FLOW_COST 768
#define DNS_CACHE_COST 384 /* an entry with its answer */
#define FAKE_IP_COST 128   /* a 64-byte slot and its reverse map */
#define PCB_COST 272       /* sizeof(struct tcp_pcb) with these lwipopts */
#define LISTENER_COST 80
#define SEG_COST 32
#define PBUF_COST 24

enum part { P_RULES, P_HEAP, P_FLOWS, P_LUA, P_DNS, P_POOLS, P__N };

/* Per mille of what |fixed| leaves; the sum is 1000. */
static const struct {
    unsigned per_mille;
    size_t floor; /* bytes */
} shares[P__N] = {
    [P_RULES] = {585, (size_t)1 << 20},
    [P_HEAP] = {75, (size_t)512 << 10},
    [P_FLOWS] = {210, (size_t)512 << 10},
    [P_POOLS] = {50, (size_t)128 << 10},
    [P_LUA] = {50, (size_t)512 << 10},
    [P_DNS] = {30, (size_t)128 << 10},
};

static size_t
min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

size_t
engine_budget_cap(size_t v, size_t cap)
{
    if (cap == 0)
        return v;
    return v == 0 || v > cap ? cap : v;
}

int
engine_budget_size(size_t limit, struct engine_budget *b)
{
    *b = (struct engine_budget){0};
    if (limit == 0)
        return 0;
    if (limit < ENGINE_BUDGET_MIN)
        return -1;
    b->limit = limit;
    b->fixed = FIXED_BASE + limit / 1000 * FIXED_PER_MILLE;
    size_t rest = limit - b->fixed, part[P__N];
    for (int i = 0; i < P__N; i++) {
        part[i] = rest / 1000 * shares[i].per_mille;
        if (part[i] < shares[i].floor)
            part[i] = shares[i].floor;
    }
    b->rules = part[P_RULES];
    b->lua = part[P_LUA];
    b->lwip_heap = min_sz(part[P_HEAP], NETSTACK_HEAP_MAX);
    /* Flows: 15/16 TCP, the rest UDP mappings (each holds a socket). */
    b->tcp_flows = min_sz(part[P_FLOWS] / 16 * 15 / TCP_FLOW_COST,
                          (NETSTACK_PCBS_MAX - 16) / 9 * 8); /* each needs a pcb */
    b->udp_flows = part[P_FLOWS] / 16 / UDP_FLOW_COST;
    b->flow_bytes = b->tcp_flows * TCP_FLOW_COST + b->udp_flows * UDP_FLOW_COST;
    /* DNS: a quarter for the resolver's cache, the rest fake-IP mappings. */
    b->dns_cache = part[P_DNS] / 4 / DNS_CACHE_COST;
    b->fake_ips = part[P_DNS] / 4 * 3 / FAKE_IP_COST;
    b->dns_bytes = b->dns_cache * DNS_CACHE_COST + b->fake_ips * FAKE_IP_COST;
    /* lwIP's pools: a pcb per flow, plus an eighth for TIME_WAIT and
     * handshakes (tcp_alloc recycles TIME_WAIT first when they run out);
     * segments for a heap full of small ones; ROM/REF pbufs are rare
     * (writes copy into the heap). What is left of the share goes to
     * listeners, one per destination port in use. */
    b->pcbs = min_sz(b->tcp_flows + b->tcp_flows / 8 + 16, NETSTACK_PCBS_MAX);
    b->segs = min_sz(b->lwip_heap / 512 + b->pcbs * 2, NETSTACK_SEGS_MAX);
    b->pbufs = min_sz(b->pcbs, NETSTACK_PBUFS_MAX);
    size_t used = b->pcbs * PCB_COST + b->segs * SEG_COST + b->pbufs * PBUF_COST;
    size_t left = part[P_POOLS] > used ? part[P_POOLS] - used : 0;
    b->listeners = min_sz(left / LISTENER_COST < 64 ? 64 : left / LISTENER_COST,
                          NETSTACK_LISTENERS_MAX);
    b->lwip_pools = used + b->listeners * LISTENER_COST;
    /* Floors come out of the rule sets' share, the largest: near
     * ENGINE_BUDGET_MIN the parts still add up to at most the limit. */
    size_t others = b->lwip_heap + b->lwip_pools + b->flow_bytes + b->lua + b->dns_bytes;
    if (others + b->rules > rest)
        b->rules = rest > others ? rest - others : 0;
    /* The packet queues, in the fixed part: packets_in's, 1/32 of it at
     * 1500-byte packets; the write queue 1/32 (it flushes when full; lwIP
     * cannot emit more at once than its heap holds anyway). */
    b->queue = min_sz(b->fixed / 32 / 1536, 1024);
    b->wq = min_sz(b->fixed / 32, (size_t)2 << 20);
    return 0;
}

const char *
engine_budget_fmt(size_t v, char *buf, size_t n)
{
    if (v >= (size_t)1 << 20 && v % ((size_t)1 << 20) == 0)
        snprintf(buf, n, "%zu MiB", v >> 20);
    else if (v >= (size_t)1 << 20)
        snprintf(buf, n, "%.1f MiB", (double)v / (1 << 20));
    else
        snprintf(buf, n, "%zu KiB", v >> 10);
    return buf;
}

int
engine_budget_for(size_t opt_limit, struct script *s, struct engine_budget *b, char *err,
                  size_t errlen)
{
    size_t limit = opt_limit ? opt_limit : script_config(s)->memory_limit;
    char l[32], r[32], h[32];
    if (engine_budget_size(limit, b) != 0) {
        snprintf(err, errlen, "memory_limit = %s: chute needs at least %s",
                 engine_budget_fmt(limit, l, sizeof(l)),
                 engine_budget_fmt(ENGINE_BUDGET_MIN, r, sizeof(r)));
        return -1;
    }
    if (limit == 0)
        return 0;
    size_t rules = script_rules_memory(s);
    if (rules > b->rules) {
        snprintf(err, errlen, "the bundle's rule sets take %s, over their share of memory_limit "
                 "= %s (%s): raise memory_limit or load fewer rules",
                 engine_budget_fmt(rules, r, sizeof(r)), engine_budget_fmt(limit, l, sizeof(l)),
                 engine_budget_fmt(b->rules, h, sizeof(h)));
        return -1;
    }
    return script_memory_cap(s, b->lua, limit, err, errlen);
}

void
engine_budget_log(const struct engine_budget *b)
{
    if (b->limit == 0)
        return;
    char l[32], h[32], p[32], f[32], r[32], u[32], d[32], x[32];
    LOG_INFO("memory_limit %s: lwIP heap %s, pools %s (%zu pcbs, %zu listeners, %zu segments); "
             "%zu TCP + %zu UDP flows (%s); rule sets %s; Lua %s; DNS %zu cache + %zu fake IPs "
             "(%s); the rest %s",
             engine_budget_fmt(b->limit, l, sizeof(l)), engine_budget_fmt(b->lwip_heap, h, sizeof(h)),
             engine_budget_fmt(b->lwip_pools, p, sizeof(p)), b->pcbs, b->listeners, b->segs,
             b->tcp_flows, b->udp_flows, engine_budget_fmt(b->flow_bytes, f, sizeof(f)),
             engine_budget_fmt(b->rules, r, sizeof(r)), engine_budget_fmt(b->lua, u, sizeof(u)),
             b->dns_cache, b->fake_ips, engine_budget_fmt(b->dns_bytes, d, sizeof(d)),
             engine_budget_fmt(b->fixed, x, sizeof(x)));
}

void
engine_budget_netstack(const struct engine *e)
{
    const struct engine_budget *b = &e->budget;
    struct netstack_limits l = {.heap = b->lwip_heap, .pcbs = b->pcbs, .listeners = b->listeners,
                                .segs = b->segs, .pbufs = b->pbufs};
    netstack_set_limits(&l);
}
