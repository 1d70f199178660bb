#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chute/chute.h"
#include "dns/dns.h"
#include "outbound/set.h"
#include "tls/tls.h"
#include "flow/dcache.h"
#include "flow/udp.h"
#include "netstack/netstack.h"
#include "tun/tun.h"
#include "engine/engine.h"
#include "log/log.h"
#include "flow/flow.h"
#include "inbound/inbound.h"
#include "script/script.h"

struct chute_engine {
    struct engine e;
    int cli_log_level; /* -1: the bundle decides */
    int handle_signals;
    ev_timer publish;
};

enum { PUB_ACTIVE, PUB_TOTAL, PUB_UP, PUB_DOWN, PUB_CALLS, PUB_ERRORS, PUB_RELOADS, PUB_LUA,
       PUB_VERSION, PUB_DCACHE };

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

const char *
chute_version(void)
{
    return CHUTE_VERSION;
}

static void
apply_log_level(struct chute_engine *ce)
{
    if (ce->cli_log_level >= 0)
        log_threshold = (enum log_level)ce->cli_log_level;
    else if (ce->e.script != NULL && script_config(ce->e.script)->log_level >= 0)
        log_threshold = (enum log_level)script_config(ce->e.script)->log_level;
}

void
engine_stats_publish(struct engine *e)
{
    struct flow_table_stats fs;
    struct script_stats ss = {0};
    flow_table_stats(e->flows, &fs);
    if (e->script != NULL)
        script_stats(e->script, &ss);
    atomic_store_explicit(&e->_pub[PUB_ACTIVE], fs.active, memory_order_relaxed);
    atomic_store_explicit(&e->_pub[PUB_TOTAL], fs.total, memory_order_relaxed);
    atomic_store_explicit(&e->_pub[PUB_UP], fs.bytes_up, memory_order_relaxed);
    atomic_store_explicit(&e->_pub[PUB_DOWN], fs.bytes_down, memory_order_relaxed);
    atomic_store_explicit(&e->_pub[PUB_CALLS], e->route_calls_before + ss.route_calls,
                          memory_order_relaxed);
    atomic_store_explicit(&e->_pub[PUB_ERRORS], e->route_errors_before + ss.route_errors,
                          memory_order_relaxed);
    atomic_store_explicit(&e->_pub[PUB_LUA], ss.lua_bytes, memory_order_relaxed);
    atomic_store_explicit(&e->_pub[PUB_VERSION], e->rule_version, memory_order_relaxed);
    struct flow_dcache_stats ds = {0};
    if (e->dcache != NULL)
        flow_dcache_stats(e->dcache, &ds);
    atomic_store_explicit(&e->_pub[PUB_DCACHE], e->dcache_hits_before + ds.hits,
                          memory_order_relaxed);
}

static void name_policy(struct engine *e, struct flow *f);

/* The flow environment's calls (engine.h: struct flow_env). */
static void
env_decide(void *ud, struct flow *f)
{
    engine_route(ud, f);
}

static int
env_name(void *ud, struct flow *f)
{
    return engine_flow_name(ud, f);
}

static int
env_dns_tcp(void *ud, struct flow *f)
{
    return engine_dns_tcp(ud, f);
}
static void route(struct engine *e, struct flow *f);

void
engine_route(struct engine *e, struct flow *f)
{
    route(e, f);
    name_policy(e, f);
}

static void
route(struct engine *e, struct flow *f)
{
    if (flow_dcache_get(e->dcache, f))
        return;
    f->_reads = 0;
    f->why[0] = '\0';
    script_route(e->script, f);
    if (!(f->_reads & FLOW_READ_UNCACHEABLE) && strcmp(f->rule, "route") == 0)
        flow_dcache_put(e->dcache, f);
}

/* The policy's name, for the flow's close line. */
static void
name_policy(struct engine *e, struct flow *f)
{
    f->policy_name = f->policy >= FLOW_POLICY__BUILTIN
                         ? script_policy_name(e->script, f->policy) /* interned by the set */
                         : NULL;
}

void
engine_stats_log(struct engine *e)
{
    struct flow_table_stats fs;
    struct script_stats ss;
    struct flow_dcache_stats ds;
    flow_table_stats(e->flows, &fs);
    script_stats(e->script, &ss);
    flow_dcache_stats(e->dcache, &ds);
    struct dns_resolver_stats rs;
    struct dns_server_stats dss = {0};
    struct outbound_set_stats os = {0};
    dns_resolver_stats(e->dns, &rs);
    if (e->dnss != NULL)
        dns_server_stats(e->dnss, &dss);
    if (e->out.set != NULL)
        outbound_set_stats(e->out.set, &os);
    char more[640];
    snprintf(more, sizeof(more),
             " dns_queries=%llu dns_fake=%llu dns_forwarded=%llu dns_hook=%llu dns_blocked=%llu "
             "dns_formerr=%llu dns_servfail=%llu dns_fake_misses=%llu dns_fake_entries=%zu "
             "dns_fake_bytes=%zu resolver_queries=%llu resolver_sent=%llu resolver_cache_hits=%llu "
             "resolver_cache_misses=%llu resolver_timeouts=%llu resolver_tcp=%llu "
             "proxy_auth_failures=%llu health_checks=%llu health_failures=%llu group_switches=%llu",
             (unsigned long long)dss.queries, (unsigned long long)dss.fake_answers,
             (unsigned long long)dss.forwarded, (unsigned long long)dss.hook_answers,
             (unsigned long long)dss.blocked, (unsigned long long)dss.formerr,
             (unsigned long long)dss.servfail, (unsigned long long)dss.fake_misses,
             dss.fake_entries, dss.fake_bytes, (unsigned long long)rs.queries,
             (unsigned long long)rs.sent, (unsigned long long)rs.cache_hits,
             (unsigned long long)rs.cache_misses, (unsigned long long)rs.timeouts,
             (unsigned long long)rs.truncated_tcp, (unsigned long long)outbound_auth_failures(),
             (unsigned long long)os.checks, (unsigned long long)os.check_failures,
             (unsigned long long)os.switches);
    if (e->out.set != NULL) {
        char groups[1024];
        outbound_set_describe(e->out.set, groups, sizeof(groups));
        if (groups[0] != '\0')
            LOG_INFO("groups %s", groups);
    }
    LOG_INFO("stats flows_active=%llu flows_total=%llu bytes_up=%llu bytes_down=%llu "
             "route_calls=%llu route_errors=%llu dcache_hits=%llu dcache_misses=%llu dcache_size=%zu "
             "rule_version=%u lua_bytes=%zu%s",
             (unsigned long long)fs.active, (unsigned long long)fs.total,
             (unsigned long long)fs.bytes_up, (unsigned long long)fs.bytes_down,
             (unsigned long long)(e->route_calls_before + ss.route_calls),
             (unsigned long long)(e->route_errors_before + ss.route_errors),
             (unsigned long long)(e->dcache_hits_before + ds.hits), (unsigned long long)ds.misses,
             ds.size, e->rule_version,
             ss.lua_bytes, more);
    if (e->tun == NULL)
        return;
    struct tun_stats ts;
    struct netstack_stats ns;
    struct flow_udp_stats us;
    tun_stats(e->tun, &ts);
    netstack_stats(&ns);
    flow_udp_stats(e->udp, &us);
    LOG_INFO("stats tun pkts_in=%llu pkts_out=%llu bytes_in=%llu bytes_out=%llu gso_in=%llu "
             "gso_out=%llu batches=%llu batch_mean=%.1f wq_drops=%llu "
             "drops=%llu/%llu/%llu/%llu/%llu/%llu bad_dst=%llu icmp_echo=%llu fast_path=%llu "
             "tcp_active=%llu tcp_total=%llu syn_dups=%llu syn_dropped=%llu tw_reused=%llu sniffed=%llu rst_sent=%llu "
             "heap_used=%llu heap_max=%llu heap_errors=%llu rx_drops=%llu mem_pauses=%llu "
             "listeners=%llu udp_active=%llu udp_total=%llu udp_dropped=%llu",
             (unsigned long long)ts.pkts_in, (unsigned long long)ts.pkts_out,
             (unsigned long long)ts.bytes_in, (unsigned long long)ts.bytes_out,
             (unsigned long long)ts.gso_in, (unsigned long long)ts.gso_out,
             (unsigned long long)ts.batches, ts.batches ? (double)ts.pkts_in / ts.batches : 0.0,
             (unsigned long long)ts.wq_drops, (unsigned long long)e->dp.drops[1],
             (unsigned long long)e->dp.drops[2], (unsigned long long)e->dp.drops[3],
             (unsigned long long)e->dp.drops[4], (unsigned long long)e->dp.drops[5],
             (unsigned long long)e->dp.drops[6], (unsigned long long)e->dp.bad_dst,
             (unsigned long long)e->dp.icmp_echo, (unsigned long long)ns.fast_path,
             (unsigned long long)ns.conns_active, (unsigned long long)ns.conns_total,
             (unsigned long long)ns.syn_dups, (unsigned long long)ns.syn_dropped,
             (unsigned long long)ns.tw_reused, (unsigned long long)ns.sniffed,
             (unsigned long long)ns.rst_sent, (unsigned long long)ns.heap_used,
             (unsigned long long)ns.heap_max, (unsigned long long)ns.heap_errors,
             (unsigned long long)ns.rx_drops, (unsigned long long)ns.mem_pauses,
             (unsigned long long)ns.listeners, (unsigned long long)us.active,
             (unsigned long long)us.total, (unsigned long long)us.dropped);
}

int
engine_load(struct engine *e, const char *dir, const char *src, char *err, size_t errlen)
{
    struct script *s = script_load(dir, src, err, errlen);
    if (s == NULL)
        return -1;
    struct outbound_set *set = script_outbound_set(s);
    if (outbound_set_needs_tls(set) && e->out.tls == NULL) {
        /* The trust store loads once (~40 ms), when a bundle first needs it. */
        char terr[256];
        e->out.tls = tls_ctx_new(NULL, terr, sizeof(terr));
        if (e->out.tls == NULL) {
            snprintf(err, errlen, "%s", terr);
            script_free(s);
            return -1;
        }
    }
    if (engine_dns_load(e, e->script ? script_config(e->script) : NULL, script_config(s), err,
                        errlen) != 0) {
        script_free(s);
        return -1;
    }
    struct flow_dcache *dc = flow_dcache_new(script_config(s)->decision_cache);
    if (dc == NULL) {
        snprintf(err, errlen, "out of memory for the decision cache");
        script_free(s);
        return -1;
    }
    if (e->dcache != NULL) {
        struct flow_dcache_stats ds;
        flow_dcache_stats(e->dcache, &ds);
        e->dcache_hits_before += ds.hits;
        flow_dcache_free(e->dcache);
    }
    e->dcache = dc;
    /* Route counters carry over so stats stay monotonic across reloads. */
    struct script *old = e->script;
    if (old != NULL) {
        struct script_stats ss;
        script_stats(old, &ss);
        e->route_calls_before += ss.route_calls;
        e->route_errors_before += ss.route_errors;
    }
    e->script = s;
    e->rule_version++;
    const struct script_config *cfg = script_config(s);
    /* Running flows take the new timeouts at their next check. */
    e->fopts = (struct flow_opts){.connect_timeout = cfg->connect_timeout,
                                  .idle_timeout = cfg->idle_timeout,
                                  .udp_timeout = cfg->udp_timeout};
    /* New handshakes check the new credentials (they live in the script). */
    e->users[0] = (struct inbound_users){cfg->socks.num_users, cfg->socks.users};
    e->users[1] = (struct inbound_users){cfg->http.num_users, cfg->http.users};
    snprintf(e->out.interface, sizeof(e->out.interface), "%s", cfg->out_interface);
    e->out.fwmark = cfg->out_fwmark;
    e->local = e->out;
    e->local.interface[0] = '\0';
    e->local.fwmark = 0;
    e->local.set = NULL;
    engine_dns_hook(e);
    /* Connections opening through the old set keep it alive until done. */
    struct outbound_set *oldset = e->out.set;
    e->out.set = outbound_set_ref(set);
    outbound_set_start(set, &e->out, oldset);
    if (oldset != NULL) {
        outbound_set_stop(oldset);
        outbound_set_unref(oldset);
    }
    script_free(old);
    return 0;
}

void
engine_reload(struct engine *e)
{
    char err[1024];
    struct chute_engine *ce = CONTAINER(e, struct chute_engine, e);
    if (engine_load(e, e->bundle_dir, e->bundle_src, err, sizeof(err)) != 0) {
        LOG_ERROR("reload failed, keeping the running bundle: %s", err);
        return;
    }
    apply_log_level(ce);
    atomic_fetch_add_explicit(&e->_pub[PUB_RELOADS], 1, memory_order_relaxed);
    LOG_INFO("reloaded %s (rule version %u); flows in flight keep their decision",
             e->bundle_dir ? e->bundle_dir : "bundle", e->rule_version);
    engine_stats_publish(e);
}

int
chute_engine_new(chute_engine **out, const struct chute_options *opts)
{
    struct chute_engine *ce = calloc(1, sizeof(*ce));
    if (ce == NULL)
        return CHUTE_ERR_NOMEM;
    struct engine *e = &ce->e;
    ce->cli_log_level = -1;
    if (opts != NULL && opts->log_level != NULL) {
        ce->cli_log_level = log_level_parse(opts->log_level);
        if (ce->cli_log_level < 0) {
            free(ce);
            return CHUTE_ERR_INVALID;
        }
        log_threshold = (enum log_level)ce->cli_log_level;
    }
    ce->handle_signals = opts != NULL && opts->handle_signals;
    e->loop = ev_loop_new(EVFLAG_AUTO);
    e->flows = flow_table_new();
    e->fenv = (struct flow_env){.loop = e->loop, .flows = e->flows, .out = &e->out,
                                .local = &e->local, .opts = &e->fopts, .name = env_name,
                                .decide = env_decide, .dns_tcp = env_dns_tcp, .ud = e};
    if (e->loop == NULL || e->flows == NULL)
        goto fail;
    struct dns_resolver_opts dopts;
    dns_resolver_opts_default(&dopts);
    char derr[128];
    e->dns = dns_resolver_new(e->loop, &dopts, derr, sizeof(derr));
    if (e->dns == NULL)
        goto fail;
    e->out.loop = e->loop;
    e->out.dns = e->dns;
    *out = ce;
    return 0;
fail:
    if (e->loop != NULL)
        ev_loop_destroy(e->loop);
    flow_table_free(e->flows);
    free(ce);
    return CHUTE_ERR_NOMEM;
}

static int
load(struct chute_engine *ce, const char *dir, const char *src, char *err, size_t errlen)
{
    char tmp[8];
    if (errlen == 0) {
        err = tmp;
        errlen = sizeof(tmp);
    }
    if (engine_load(&ce->e, dir, src, err, errlen) != 0)
        return CHUTE_ERR_INVALID;
    free(ce->e.bundle_dir);
    free(ce->e.bundle_src);
    ce->e.bundle_dir = dir ? strdup(dir) : NULL;
    ce->e.bundle_src = src ? strdup(src) : NULL;
    apply_log_level(ce);
    return 0;
}

int
chute_engine_load_bundle(chute_engine *ce, const char *path, char *err, size_t errlen)
{
    return load(ce, path, NULL, err, errlen);
}

int
chute_engine_load_string(chute_engine *ce, const char *main_lua, char *err, size_t errlen)
{
    return load(ce, NULL, main_lua, err, errlen);
}

static void
on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
    struct engine *e = CONTAINER(w, struct engine, _stop);
    LOG_INFO("stopping: closing %s", "listeners and connections");
    inbound_close(e->socks);
    inbound_close(e->http);
    e->socks = e->http = NULL;
    engine_tun_stop(e);
    ev_break(loop, EVBREAK_ALL);
}

static void
on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct engine *e = w->data;
    if (w->signum == SIGHUP)
        engine_reload(e);
    else if (w->signum == SIGUSR1)
        engine_stats_log(e);
    else
        on_stop(loop, &e->_stop, 0);
}

static void
on_reload(struct ev_loop *loop, ev_async *w, int revents)
{
    engine_reload(CONTAINER(w, struct engine, _reload));
}

static void
on_publish(struct ev_loop *loop, ev_timer *w, int revents)
{
    engine_stats_publish(&CONTAINER(w, struct chute_engine, publish)->e);
}

/* A listener's options from the bundle's listen = {...}; |users| is the
 * engine's table that each load rewrites. */
static struct inbound_opts
listener_opts(const struct script_listener *l, const struct inbound_users *users)
{
    struct inbound_opts o = {.addrlen = l->addrlen, .text = l->text, .users = users};
    o.addr = l->addr;
    return o;
}

int
chute_engine_run(chute_engine *ce, char *err, size_t errlen)
{
    struct engine *e = &ce->e;
    char tmp[8];
    if (errlen == 0) {
        err = tmp;
        errlen = sizeof(tmp);
    }
    if (e->script == NULL) {
        snprintf(err, errlen, "no bundle loaded");
        return CHUTE_ERR_INVALID;
    }
    const struct script_config *cfg = script_config(e->script);
    if (!cfg->socks.enabled && !cfg->http.enabled && !cfg->tun.enabled && !cfg->dns.has_listen) {
        snprintf(err, errlen, "the bundle takes no traffic: give chute.config a listen = {...}, "
                              "a tun = {...} or a dns = { listen = ... }");
        return CHUTE_ERR_INVALID;
    }
    /* splice(2) to a closed socket raises SIGPIPE; EPIPE is handled. */
    signal(SIGPIPE, SIG_IGN);
    struct inbound_opts so = listener_opts(&cfg->socks, &e->users[0]);
    struct inbound_opts ho = listener_opts(&cfg->http, &e->users[1]);
    if (cfg->socks.enabled &&
        (e->socks = inbound_listen(&e->fenv, FLOW_IN_SOCKS, &so, err, errlen)) == NULL)
        return CHUTE_ERR_SYSTEM;
    if (cfg->http.enabled &&
        (e->http = inbound_listen(&e->fenv, FLOW_IN_HTTP, &ho, err, errlen)) == NULL) {
        inbound_close(e->socks);
        e->socks = NULL;
        return CHUTE_ERR_SYSTEM;
    }
    if (engine_tun_start(e, err, errlen) != 0) {
        inbound_close(e->socks);
        inbound_close(e->http);
        e->socks = e->http = NULL;
        return CHUTE_ERR_SYSTEM;
    }
    ev_async_init(&e->_stop, on_stop);
    ev_async_start(e->loop, &e->_stop);
    ev_async_init(&e->_reload, on_reload);
    ev_async_start(e->loop, &e->_reload);
    ev_timer_init(&ce->publish, on_publish, 0.5, 0.5);
    ev_timer_start(e->loop, &ce->publish);
    if (ce->handle_signals) {
        ev_signal_init(&e->_sigint, on_signal, SIGINT);
        ev_signal_init(&e->_sigterm, on_signal, SIGTERM);
        ev_signal_init(&e->_sighup, on_signal, SIGHUP);
        ev_signal_init(&e->_sigusr1, on_signal, SIGUSR1);
        e->_sigint.data = e->_sigterm.data = e->_sighup.data = e->_sigusr1.data = e;
        ev_signal_start(e->loop, &e->_sigint);
        ev_signal_start(e->loop, &e->_sigterm);
        ev_signal_start(e->loop, &e->_sighup);
        ev_signal_start(e->loop, &e->_sigusr1);
    }
    e->_running = 1;
    if (atomic_load(&e->_stop_requested))
        ev_async_send(e->loop, &e->_stop);
    LOG_INFO("chute %s running (rule version %u)", CHUTE_VERSION, e->rule_version);
    ev_run(e->loop, 0);
    e->_running = 0;
    ev_timer_stop(e->loop, &ce->publish);
    ev_async_stop(e->loop, &e->_stop);
    ev_async_stop(e->loop, &e->_reload);
    if (ce->handle_signals) {
        ev_signal_stop(e->loop, &e->_sigint);
        ev_signal_stop(e->loop, &e->_sigterm);
        ev_signal_stop(e->loop, &e->_sighup);
        ev_signal_stop(e->loop, &e->_sigusr1);
    }
    engine_stats_publish(e);
    engine_stats_log(e);
    LOG_INFO("stopped");
    return 0;
}

void
chute_engine_stop(chute_engine *ce)
{
    atomic_store(&ce->e._stop_requested, 1);
    ev_async_send(ce->e.loop, &ce->e._stop);
}

void
chute_engine_reload(chute_engine *ce)
{
    ev_async_send(ce->e.loop, &ce->e._reload);
}

void
chute_engine_stats(chute_engine *ce, struct chute_stats *out)
{
    _Atomic uint64_t *p = ce->e._pub;
    out->flows_active = atomic_load_explicit(&p[PUB_ACTIVE], memory_order_relaxed);
    out->flows_total = atomic_load_explicit(&p[PUB_TOTAL], memory_order_relaxed);
    out->bytes_up = atomic_load_explicit(&p[PUB_UP], memory_order_relaxed);
    out->bytes_down = atomic_load_explicit(&p[PUB_DOWN], memory_order_relaxed);
    out->route_calls = atomic_load_explicit(&p[PUB_CALLS], memory_order_relaxed);
    out->route_errors = atomic_load_explicit(&p[PUB_ERRORS], memory_order_relaxed);
    out->reloads = atomic_load_explicit(&p[PUB_RELOADS], memory_order_relaxed);
    out->lua_bytes = atomic_load_explicit(&p[PUB_LUA], memory_order_relaxed);
    out->rule_version = (uint32_t)atomic_load_explicit(&p[PUB_VERSION], memory_order_relaxed);
    out->dcache_hits = atomic_load_explicit(&p[PUB_DCACHE], memory_order_relaxed);
}

void
chute_engine_free(chute_engine *ce)
{
    if (ce == NULL)
        return;
    struct engine *e = &ce->e;
    engine_tun_stop(e);
    inbound_close(e->socks);
    inbound_close(e->http);
    if (e->out.set != NULL) {
        outbound_set_stop(e->out.set);
        outbound_set_unref(e->out.set);
    }
    dns_server_free(e->dnss);
    dns_resolver_free(e->dns);
    script_free(e->script);
    tls_ctx_free(e->out.tls);
    flow_table_free(e->flows);
    ev_loop_destroy(e->loop);
    flow_dcache_free(e->dcache);
    free(e->bundle_dir);
    free(e->bundle_src);
    free(ce);
}

int
chute_bundle_check(const char *path, char *err, size_t errlen)
{
    char tmp[8];
    if (errlen == 0) {
        err = tmp;
        errlen = sizeof(tmp);
    }
    struct script *s = script_load(path, NULL, err, errlen);
    if (s == NULL)
        return CHUTE_ERR_INVALID;
    script_free(s);
    return 0;
}
