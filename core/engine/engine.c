#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chute/chute.h"
#include "dns/dns.h"
#include "fetch/fetch.h"
#include "outbound/set.h"
#include "tls/tls.h"
#include "flow/dcache.h"
#include "engine/engine.h"
#include "log/log.h"
#include "mitm/mitm.h"
#include "flow/flow.h"
#include "inbound/inbound.h"
#include "script/script.h"

struct chute_engine {
    struct engine e;
    int cli_log_level; /* -1: the bundle decides */
    int handle_signals;
    ev_timer publish;
};

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

static int cli_log_format = -1; /* see engine.h */

void
engine_cli_log_format(int format)
{
    cli_log_format = format;
}

/* log_format and log_file: `chute run --log-format` wins over the bundle;
 * a bundle without log_file logs to stderr. */
static int
apply_log_output(struct chute_engine *ce, char *err, size_t errlen)
{
    const struct script_config *c = script_config(ce->e.script);
    log_format = (enum log_format)(cli_log_format >= 0 ? cli_log_format
                                   : c->log_format >= 0 ? c->log_format
                                                        : LOG_FORMAT_TEXT);
    return log_file_open(c->log_file, err, errlen);
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

/* A TUN or SOCKS5 flow to an address, on a port the MITM list names: the
 * list needs its name, so the first bytes are read for the SNI before
 * anything is decided (the flow comes back with _sniffable off). */
static int
mitm_needs_name(const struct engine *e, const struct flow *f)
{
    return e->fenv.intercept != NULL && f->network == FLOW_TCP && f->_sniffable &&
           f->dst.kind != FLOW_ADDR_NAME && f->sniffed == NULL &&
           mitm_port_used(e->mitm, f->dst.port);
}

void
engine_route(struct engine *e, struct flow *f)
{
    if (mitm_needs_name(e, f)) {
        f->_reads |= FLOW_READ_HOST;
        return;
    }
    route(e, f);
    if (e->mitm != NULL && f->network == FLOW_UDP && f->policy != FLOW_POLICY_REJECT &&
        mitm_blocks_quic(e->mitm, f)) {
        /* Refused with ICMP port unreachable: the browser falls back to TCP. */
        f->policy = FLOW_POLICY_REJECT;
        f->rule = "mitm: QUIC blocked";
    }
    name_policy(e, f);
    flow_log_decided(f);
}

static int install(struct engine *e, struct script *s, char *err, size_t errlen);

static void
route(struct engine *e, struct flow *f)
{
    if (e->mode != ENGINE_MODE_RULE) { /* the control API's mode: no script, no cache */
        int g = e->mode == ENGINE_MODE_GLOBAL ? script_policy_lookup(e->script, "GLOBAL") : -1;
        f->policy = g >= 0 ? g : FLOW_POLICY_DIRECT;
        f->rule = e->mode == ENGINE_MODE_GLOBAL ? "mode global" : "mode direct";
        return;
    }
    if (flow_dcache_get(e->dcache, f))
        return;
    f->_reads = 0;
    f->why[0] = '\0';
    /* An IP rule may wait for the name (flow_open, flow/udp.c). */
    f->_resolvable = e->dns != NULL;
    script_route(e->script, f);
    if ((f->_reads & FLOW_READ_RESOLVE) && f->_resolvable &&
        f->resolved.state == FLOW_RESOLVE_NONE) {
        f->policy = FLOW_POLICY_DIRECT; /* a trial: flow_open resolves and decides again */
        f->rule = "resolving";
        return;
    }
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

int
engine_load(struct engine *e, const char *dir, const char *src, char *err, size_t errlen)
{
    struct script *s = script_load(dir, src, err, errlen);
    if (s == NULL)
        return -1;
    return install(e, s, err, errlen);
}

/* Swaps in |s| (freed on failure), on the loop. */
static int
install(struct engine *e, struct script *s, char *err, size_t errlen)
{
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
    struct engine_mitm mitm;
    if (engine_mitm_prepare(e, s, &mitm, err, errlen) != 0) {
        script_free(s);
        return -1;
    }
    struct engine_budget was = e->budget; /* budget.c: memory_limit sized for |s| */
    if (engine_budget_for(e->memory_limit, s, &e->budget, err, errlen) != 0 ||
        engine_dns_load(e, e->script ? script_config(e->script) : NULL, script_config(s), err,
                        errlen) != 0) {
        e->budget = was;
        engine_mitm_release(&mitm);
        script_free(s);
        return -1;
    }
    struct flow_dcache *dc = flow_dcache_new(script_config(s)->decision_cache);
    if (dc == NULL) {
        snprintf(err, errlen, "out of memory for the decision cache");
        e->budget = was;
        engine_mitm_release(&mitm);
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
                                  .udp_timeout = cfg->udp_timeout,
                                  .tcp_max = e->budget.tcp_flows,
                                  .udp_max = e->budget.udp_flows};
    engine_budget_log(&e->budget);
    /* New handshakes check the new credentials (they live in the script). */
    e->users[0] = (struct inbound_users){cfg->socks.num_users, cfg->socks.users};
    e->users[1] = (struct inbound_users){cfg->http.num_users, cfg->http.users};
    e->users[2] = (struct inbound_users){cfg->mixed.num_users, cfg->mixed.users};
    snprintf(e->out.interface, sizeof(e->out.interface), "%s", cfg->out_interface);
    e->out.fwmark = cfg->out_fwmark;
    e->out.is_self = engine_is_self;
    e->out.self_arg = e;
    e->local = e->out;
    e->local.interface[0] = '\0';
    e->local.fwmark = 0;
    e->local.protect = NULL;
    e->local.set = NULL;
    engine_dns_hook(e);
    engine_mitm_commit(e, &mitm); /* the old script's hooks are gone from it */
    /* Connections opening through the old set keep it alive until done. */
    struct outbound_set *oldset = e->out.set;
    outbound_set_log_diff(oldset, set);
    e->out.set = outbound_set_ref(set);
    outbound_set_start(set, &e->out, oldset);
    if (oldset != NULL) {
        outbound_set_stop(oldset);
        outbound_set_unref(oldset);
    }
    script_free(old);
    engine_fetch_sync(e);
    return 0;
}

/* What a reload cannot change while running: said, not silently ignored. */
static void
warn_unapplied(const struct script_config *was, const struct script_config *now)
{
    const struct script_listener *l[3][2] = {
        {&was->socks, &now->socks}, {&was->http, &now->http}, {&was->mixed, &now->mixed}};
    static const char *const names[3] = {"socks", "http", "mixed"};
    for (int i = 0; i < 3; i++)
        if (l[i][0]->enabled != l[i][1]->enabled ||
            (l[i][1]->enabled && strcmp(l[i][0]->text, l[i][1]->text) != 0))
            LOG_WARN("reload: listen.%s changed (%s -> %s); restart chute to apply it",
                     names[i], l[i][0]->enabled ? l[i][0]->text : "none",
                     l[i][1]->enabled ? l[i][1]->text : "none");
    if (was->tun.enabled != now->tun.enabled ||
        (now->tun.enabled && strcmp(was->tun.name, now->tun.name) != 0))
        LOG_WARN("reload: tun changed (%s -> %s); restart chute to apply it",
                 was->tun.enabled ? was->tun.name : "none", now->tun.enabled ? now->tun.name : "none");
}

static void
reloaded(struct engine *e, struct script *s, char *err, size_t errlen)
{
    struct chute_engine *ce = CONTAINER(e, struct chute_engine, e);
    if (s != NULL && e->script != NULL)
        warn_unapplied(script_config(e->script), script_config(s));
    if (s == NULL || install(e, s, err, errlen) != 0) {
        LOG_ERROR("reload failed, keeping the running bundle: %s", err);
        return;
    }
    apply_log_level(ce);
    char lerr[512];
    if (apply_log_output(ce, lerr, sizeof(lerr)) != 0)
        LOG_ERROR("reload: %s; the log goes on where it went", lerr);
    engine_control_reload(e);
    e->reloads++;
    LOG_INFO("reloaded %s (rule version %u); flows in flight keep their decision",
             e->bundle_dir ? e->bundle_dir : "bundle", e->rule_version);
    engine_stats_publish(e);
}

/* main.lua runs off the loop (up to its 200 M instruction budget, seconds):
 * a new lua_State shares nothing with the running one, and every flow
 * goes on meanwhile. Only the swap happens on the loop. */
static void *
loader(void *arg)
{
    struct engine *e = arg;
    e->_loaded = script_load(e->bundle_dir, e->bundle_src, e->_load_err, sizeof(e->_load_err));
    ev_async_send(e->loop, &e->_load_done);
    return NULL;
}

static void
on_load_done(struct ev_loop *loop, ev_async *w, int revents)
{
    struct engine *e = CONTAINER(w, struct engine, _load_done);
    if (!e->_loading)
        return;
    pthread_join(e->_loader, NULL);
    e->_loading = 0;
    struct script *s = e->_loaded;
    e->_loaded = NULL;
    reloaded(e, s, e->_load_err, sizeof(e->_load_err));
    if (e->_reload_again) {
        e->_reload_again = 0; /* a SIGHUP while loading: load what is there now */
        engine_reload(e);
    }
}

void
engine_reload(struct engine *e)
{
    if (e->_loading) {
        e->_reload_again = 1;
        return;
    }
    e->_loaded = NULL;
    e->_load_err[0] = '\0';
    if (pthread_create(&e->_loader, NULL, loader, e) == 0) {
        e->_loading = 1;
        return;
    }
    char err[1024]; /* no thread: load on the loop */
    struct script *s = script_load(e->bundle_dir, e->bundle_src, err, sizeof(err));
    reloaded(e, s, err, sizeof(err));
}

/* Waits for a load in progress (at shutdown) and drops its result. */
static void
reload_join(struct engine *e)
{
    if (!e->_loading)
        return;
    pthread_join(e->_loader, NULL);
    e->_loading = 0;
    script_free(e->_loaded);
    e->_loaded = NULL;
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
    e->memory_limit = opts != NULL ? opts->memory_limit : 0;
    if (e->memory_limit != 0 && e->memory_limit < ENGINE_BUDGET_MIN) {
        LOG_ERROR("chute_options: memory_limit %zu bytes: at least %zu", e->memory_limit,
                  ENGINE_BUDGET_MIN);
        free(ce);
        return CHUTE_ERR_INVALID;
    }
    e->loop = ev_loop_new(EVFLAG_AUTO);
    e->flows = flow_table_new();
    e->fenv = (struct flow_env){.loop = e->loop, .flows = e->flows, .out = &e->out,
                                .local = &e->local, .opts = &e->fopts, .name = env_name,
                                .decide = env_decide, .dns_tcp = env_dns_tcp, .ud = e,
                                .resolve = engine_flow_resolve,
                                .resolve_cancel = engine_flow_resolve_cancel};
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
    int rc = engine_host_new(e, opts); /* host.c: packets_out, protect_socket */
    if (rc != 0) {
        dns_resolver_free(e->dns);
        ev_loop_destroy(e->loop);
        flow_table_free(e->flows);
        free(ce);
        return rc;
    }
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
    if (apply_log_output(ce, err, errlen) != 0)
        return CHUTE_ERR_INVALID;
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
close_listeners(struct engine *e)
{
    inbound_close(e->socks);
    inbound_close(e->http);
    inbound_close(e->mixed);
    e->socks = e->http = e->mixed = NULL;
    for (size_t i = 0; i < e->nreverse; i++)
        inbound_close(e->reverse[i]);
    free(e->reverse);
    e->reverse = NULL;
    e->nreverse = 0;
}

/* listen.reverse: one listener per origin (fixed at start, as the others). */
static int
open_reverse(struct engine *e, const struct script_config *cfg, char *err, size_t errlen)
{
    if (cfg->nreverse == 0)
        return 0;
    if ((e->reverse = calloc(cfg->nreverse, sizeof(*e->reverse))) == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < cfg->nreverse; i++) {
        const struct script_reverse *r = &cfg->reverse[i];
        struct flow_addr target;
        if (flow_addr_from_host(&target, r->host, strlen(r->host), r->port) != 0) {
            snprintf(err, errlen, "listen.reverse: bad origin \"%s\"", r->host);
            return -1;
        }
        struct inbound_opts o = {.addr = r->addr, .addrlen = r->addrlen, .text = r->text,
                                 .target = &target};
        if ((e->reverse[i] = inbound_listen(&e->fenv, FLOW_IN_REVERSE, &o, err, errlen)) == NULL)
            return -1;
        e->nreverse++;
        LOG_INFO("reverse %s -> https://%s:%u", r->text, r->host, r->port);
    }
    return 0;
}

static void
on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
    struct engine *e = CONTAINER(w, struct engine, _stop);
    LOG_INFO("stopping: closing %s", "listeners and connections");
    close_listeners(e);
    engine_tun_stop(e);
    engine_control_stop(e);
    ev_break(loop, EVBREAK_ALL);
}

/* SIGUSR2: logrotate moved the log file; lines go to a new one at the path. */
static void
engine_log_reopen(void)
{
    char err[512];
    if (log_file_reopen(err, sizeof(err)) != 0)
        LOG_ERROR("SIGUSR2: %s; the log goes on into the file it had", err);
    else
        LOG_INFO("log: reopened on SIGUSR2");
}

static void
on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct engine *e = w->data;
    if (w->signum == SIGHUP)
        engine_reload(e);
    else if (w->signum == SIGUSR1)
        engine_stats_log(e);
    else if (w->signum == SIGUSR2)
        engine_log_reopen();
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
    struct engine *e = &CONTAINER(w, struct chute_engine, publish)->e;
    engine_stats_publish(e);
    engine_trim_tick(e);
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
    if (script_listeners_check(e->script, e->host == NULL, err, errlen) != 0)
        return CHUTE_ERR_INVALID;
    script_warn_defaults(e->script);
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
    struct inbound_opts mo = listener_opts(&cfg->mixed, &e->users[2]);
    mo.mixed = 1;
    if ((cfg->mixed.enabled &&
         (e->mixed = inbound_listen(&e->fenv, FLOW_IN_SOCKS, &mo, err, errlen)) == NULL) ||
        open_reverse(e, cfg, err, errlen) != 0 || engine_tun_start(e, err, errlen) != 0 ||
        engine_control_start(e, err, errlen) != 0) {
        engine_tun_stop(e);
        close_listeners(e);
        return CHUTE_ERR_SYSTEM;
    }
    ev_async_init(&e->_stop, on_stop);
    ev_async_start(e->loop, &e->_stop);
    ev_async_init(&e->_reload, on_reload);
    ev_async_start(e->loop, &e->_reload);
    ev_async_init(&e->_load_done, on_load_done);
    ev_async_start(e->loop, &e->_load_done);
    ev_timer_init(&ce->publish, on_publish, 0.5, 0.5);
    ev_timer_start(e->loop, &ce->publish);
    if (ce->handle_signals) {
        ev_signal_init(&e->_sigint, on_signal, SIGINT);
        ev_signal_init(&e->_sigterm, on_signal, SIGTERM);
        ev_signal_init(&e->_sighup, on_signal, SIGHUP);
        ev_signal_init(&e->_sigusr1, on_signal, SIGUSR1);
        ev_signal_init(&e->_sigusr2, on_signal, SIGUSR2);
        e->_sigint.data = e->_sigterm.data = e->_sighup.data = e->_sigusr1.data = e;
        e->_sigusr2.data = e;
        ev_signal_start(e->loop, &e->_sigusr2);
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
    ev_async_stop(e->loop, &e->_load_done);
    if (ce->handle_signals) {
        ev_signal_stop(e->loop, &e->_sigint);
        ev_signal_stop(e->loop, &e->_sigterm);
        ev_signal_stop(e->loop, &e->_sighup);
        ev_signal_stop(e->loop, &e->_sigusr1);
        ev_signal_stop(e->loop, &e->_sigusr2);
    }
    engine_stats_publish(e);
    engine_stats_log(e);
    LOG_INFO("stopped");
    return 0;
}

int
chute_engine_packets_in(chute_engine *ce, const struct chute_packet *pkts, size_t n)
{
    return engine_packets_in(&ce->e, pkts, n);
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
    engine_stats_read(&ce->e, out);
}

void
chute_engine_free(chute_engine *ce)
{
    if (ce == NULL)
        return;
    struct engine *e = &ce->e;
    engine_control_stop(e);
    reload_join(e);
    fetch_set_free(e->fetch); /* waits for a check in progress */
    engine_tun_stop(e);
    engine_host_free(e);
    close_listeners(e);
    if (e->out.set != NULL) {
        outbound_set_stop(e->out.set);
        outbound_set_unref(e->out.set);
    }
    dns_server_free(e->dnss);
    dns_resolver_free(e->dns);
    script_free(e->script);
    engine_mitm_release(&e->mitm_cur);
    mitm_free(e->mitm); /* its flows were closed with the TUN and the listeners */
    tls_ctx_free(e->out.tls);
    flow_table_free(e->flows);
    ev_loop_destroy(e->loop);
    flow_dcache_free(e->dcache);
    free(e->bundle_dir);
    free(e->bundle_src);
    free(ce);
}

int
engine_bundle_check(const char *path, int need_listener, char *err, size_t errlen)
{
    char tmp[8];
    if (errlen == 0) {
        err = tmp;
        errlen = sizeof(tmp);
    }
    struct script *s = script_load(path, NULL, err, errlen);
    if (s == NULL)
        return CHUTE_ERR_INVALID;
    /* What run refuses once loaded, check refuses too. */
    struct engine_budget b;
    int rc = script_listeners_check(s, need_listener, err, errlen) != 0 ||
                     engine_budget_for(0, s, &b, err, errlen) != 0
                 ? CHUTE_ERR_INVALID
                 : 0;
    if (rc == 0)
        script_warn_defaults(s);
    script_free(s);
    return rc;
}

int
chute_bundle_check(const char *path, char *err, size_t errlen)
{
    /* A host may feed the packets: a bundle without listeners is fine. */
    return engine_bundle_check(path, 0, err, errlen);
}
