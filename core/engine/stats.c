#include <stdio.h>
#include <string.h>

#include "chute/chute.h"
#include "dns/dns.h"
#include "engine/engine.h"
#include "engine/trim.h"
#include "flow/dcache.h"
#include "flow/flow.h"
#include "flow/udp.h"
#include "inbound/inbound.h"
#include "log/counter.h"
#include "log/log.h"
#include "mitm/mitm.h"
#include "mitm/rewrite.h"
#include "netstack/netstack.h"
#include "outbound/set.h"
#include "script/script.h"
#include "tls/tls.h"
#include "tun/tun.h"

/* The stats lines (SIGUSR1, exit) and the copy chute_engine_stats() reads.
 * Each module's counters come from its own table (log/counter.h), so a
 * counter added to a module's list shows up here without an edit. */

const struct log_counter engine_dp_counters[] = {
#define X(field, key) LOG_COUNTER(struct engine_dp_stats, field, key)
    ENGINE_DP_STATS(X)
#undef X
    LOG_COUNTER_END};

/* Every module's counters at one moment. */
struct snapshot {
    struct flow_table_stats flows;
    struct script_stats script;
    struct flow_dcache_stats dcache;
    struct dns_server_stats dns;
    struct dns_resolver_stats resolver;
    struct outbound_set_stats set;
    struct tls_stats tls;
    struct inbound_stats inbound; /* every listener's, summed */
    struct mitm_stats mitm;
    struct tls_mint_stats mint;
    struct mitm_rewrite_stats rewrite;
    struct tun_stats tun; /* these three only while the TUN runs */
    struct netstack_stats net;
    struct flow_udp_stats udp;
    struct engine_mem_stats mem;
};

/* The flow and decision counters. A reload replaces the script and the
 * decision cache: the counts of the replaced ones are carried over, so these
 * only ever grow. */
static void
snapshot_flows(const struct engine *e, struct snapshot *s)
{
    flow_table_stats(e->flows, &s->flows);
    if (e->script != NULL)
        script_stats(e->script, &s->script);
    if (e->dcache != NULL)
        flow_dcache_stats(e->dcache, &s->dcache);
    s->script.route_calls += e->route_calls_before;
    s->script.route_errors += e->route_errors_before;
    s->dcache.hits += e->dcache_hits_before;
}

static void
snapshot(const struct engine *e, struct snapshot *s)
{
    snapshot_flows(e, s);
    engine_mem_stats(&s->mem);
    if (e->dnss != NULL)
        dns_server_stats(e->dnss, &s->dns);
    if (e->dns != NULL)
        dns_resolver_stats(e->dns, &s->resolver);
    if (e->out.set != NULL)
        outbound_set_stats(e->out.set, &s->set);
    if (e->out.tls != NULL)
        tls_ctx_stats(e->out.tls, &s->tls);
    inbound_stats_add(e->socks, &s->inbound);
    inbound_stats_add(e->http, &s->inbound);
    for (size_t i = 0; e->reverse != NULL && i < e->nreverse; i++)
        inbound_stats_add(e->reverse[i], &s->inbound);
    if (e->mitm != NULL)
        mitm_stats(e->mitm, &s->mitm);
    if (e->mitm_cur.mint != NULL)
        tls_mint_stats(e->mitm_cur.mint, &s->mint);
    if (e->script != NULL && script_rewrites(e->script) != NULL)
        mitm_rewrites_stats(script_rewrites(e->script), &s->rewrite);
    if (e->tun != NULL) {
        tun_stats(e->tun, &s->tun);
        netstack_stats(&s->net);
        flow_udp_stats(e->udp, &s->udp);
    }
}

/* Every module's counter group over snapshot |s|: the stats line's
 * first (ENGINE_GROUPS of them), then the TUN's (TUN_GROUPS). */
enum { ENGINE_GROUPS = 9, TUN_GROUPS = 4 };
static void
fill_groups(const struct engine *e, const struct snapshot *s,
            struct log_counter_group g[ENGINE_GROUPS + TUN_GROUPS])
{
    const struct log_counter_group all[ENGINE_GROUPS + TUN_GROUPS] = {
        {"", flow_table_counters, &s->flows, "flows"},
        {"", script_counters, &s->script, "script"},
        {"dcache_", flow_dcache_counters, &s->dcache, "dcache"},
        {"dns_", dns_server_counters, &s->dns, "dns"},
        {"resolver_", dns_resolver_counters, &s->resolver, "resolver"},
        {"", outbound_set_counters, &s->set, "proxies"},
        {"tls_", tls_counters, &s->tls, "tls"},
        {"inbound_", inbound_counters, &s->inbound, "inbound"},
        {"", engine_mem_counters, &s->mem, "memory"},
        {"", tun_counters, &s->tun, "tun"},
        {"", engine_dp_counters, &e->dp, "datapath"},
        {"", netstack_counters, &s->net, "lwip"},
        {"udp_", flow_udp_counters, &s->udp, "udp"},
    };
    memcpy(g, all, sizeof(all));
}

/* The MITM's counters, leaf minting and rewrites with them (one section). */
enum { MITM_GROUPS = 3 };
static void
fill_mitm(const struct snapshot *s, struct log_counter_group g[MITM_GROUPS])
{
    const struct log_counter_group mitm[MITM_GROUPS] = {
        {"", mitm_counters, &s->mitm, "mitm"},
        {"mitm_", tls_mint_counters, &s->mint, "mitm"},
        {"", mitm_rewrite_counters, &s->rewrite, "mitm"},
    };
    memcpy(g, mitm, sizeof(mitm));
}

void
engine_stats_groups(struct engine *e,
                    void (*emit)(void *arg, const struct log_counter_group *g, size_t n), void *arg)
{
    struct snapshot s = {0};
    snapshot(e, &s);
    struct log_counter_group g[ENGINE_GROUPS + TUN_GROUPS + MITM_GROUPS];
    fill_groups(e, &s, g);
    /* The TUN's only while it runs, the MITM's while it is on, as in the
     * stats lines. */
    size_t n = ENGINE_GROUPS + (e->tun != NULL ? TUN_GROUPS : 0);
    if (e->mitm != NULL) {
        fill_mitm(&s, g + n);
        n += MITM_GROUPS;
    }
    emit(arg, g, n);
}

void
engine_stats_log(struct engine *e)
{
    struct snapshot s = {0};
    snapshot(e, &s);
    /* Before the stats line: the e2e tests take the groups block that
     * precedes it. */
    if (e->out.set != NULL) {
        char groups[1024];
        outbound_set_describe(e->out.set, groups, sizeof(groups));
        /* One line per group: log lines never carry a line break. */
        for (char *l = groups, *nl; *l != '\0'; l = nl) {
            nl = l + strcspn(l, "\n");
            if (*nl == '\n')
                *nl++ = '\0';
            LOG_KV(LOG_LEVEL_INFO, "groups %s", l);
        }
        /* One line per proxy pool: "pool tj warm=12 cold=1 ...". */
        char pools[4096];
        outbound_set_pools_describe(e->out.set, pools, sizeof(pools));
        for (char *l = pools, *nl; *l != '\0'; l = nl) {
            nl = l + strcspn(l, "\n");
            if (*nl == '\n')
                *nl++ = '\0';
            LOG_KV(LOG_LEVEL_INFO, "pool %s", l);
        }
    }
    struct log_counter_group g[ENGINE_GROUPS + TUN_GROUPS];
    fill_groups(e, &s, g);
    char line[2048] = "";
    size_t n = log_counters_format(line, sizeof(line), g, ENGINE_GROUPS);
    /* Not in a module's stats struct: the engine's rule version, and a
     * process-wide count of the outbound folder. */
    snprintf(line + n, sizeof(line) - n,
             " rule_version=%u proxy_auth_failures=%llu rule_resolves=%llu", e->rule_version,
             (unsigned long long)outbound_auth_failures(), (unsigned long long)e->rule_resolves);
    LOG_KV(LOG_LEVEL_INFO, "stats%s", line);
    if (e->mitm != NULL) {
        struct log_counter_group mitm[MITM_GROUPS];
        fill_mitm(&s, mitm);
        line[0] = '\0';
        log_counters_format(line, sizeof(line), mitm, MITM_GROUPS);
        LOG_KV(LOG_LEVEL_INFO, "stats mitm%s", line);
    }
    if (e->tun == NULL)
        return;
    line[0] = '\0';
    n = log_counters_format(line, sizeof(line), g + ENGINE_GROUPS, TUN_GROUPS);
    /* Computed: the mean batch, and drops by reason (-enum ip_err, 1..6) in
     * the one key spec/e2e/netns.sh splits on '/'. */
    const uint64_t *d = e->dp.drops;
    snprintf(line + n, sizeof(line) - n, " batch_mean=%.1f drops=%llu/%llu/%llu/%llu/%llu/%llu",
             s.tun.batches ? (double)s.tun.pkts_in / s.tun.batches : 0.0,
             (unsigned long long)d[1], (unsigned long long)d[2], (unsigned long long)d[3],
             (unsigned long long)d[4], (unsigned long long)d[5], (unsigned long long)d[6]);
    LOG_KV(LOG_LEVEL_INFO, "stats tun%s", line);
}

/* struct chute_stats field by field: each has a slot in e->_pub, where
 * engine_stats_publish() stores it for engine_stats_read() on any thread. */
#define PUBLISHED(X)                                                                        \
    X(flows_active) X(flows_total) X(bytes_up) X(bytes_down) X(route_calls) X(route_errors) \
    X(dcache_hits) X(reloads) X(lua_bytes) X(rule_version) X(flows_refused)

enum {
#define X(field) PUB_##field,
    PUBLISHED(X)
#undef X
    PUB__COUNT
};
_Static_assert(PUB__COUNT <= sizeof(((struct engine *)0)->_pub) / sizeof(uint64_t),
               "struct engine's _pub has a slot for each published counter");

void
engine_stats_publish(struct engine *e)
{
    struct snapshot s = {0};
    snapshot_flows(e, &s);
    const struct chute_stats pub = {
        .flows_active = s.flows.active,
        .flows_total = s.flows.total,
        .bytes_up = s.flows.bytes_up,
        .bytes_down = s.flows.bytes_down,
        .route_calls = s.script.route_calls,
        .route_errors = s.script.route_errors,
        .dcache_hits = s.dcache.hits,
        .reloads = e->reloads,
        .lua_bytes = s.script.lua_bytes,
        .rule_version = e->rule_version,
        .flows_refused = s.flows.refused,
    };
#define X(field) atomic_store_explicit(&e->_pub[PUB_##field], pub.field, memory_order_relaxed);
    PUBLISHED(X)
#undef X
}

void
engine_stats_read(struct engine *e, struct chute_stats *out)
{
#define X(field) out->field = atomic_load_explicit(&e->_pub[PUB_##field], memory_order_relaxed);
    PUBLISHED(X)
#undef X
}
