#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/addr.h"
#include "outbound/set_int.h"
#include "outbound/transport.h"
#include "pool/pool.h"

/* The proxies' connection pools (core/pool sits below outbound: it pools
 * streams and knows nothing of proxies; this file is its connector). A
 * pool belongs to the running set, slot per proxy, made when a flow first
 * uses the proxy. A reload hands the pool of a proxy whose settings did
 * not change to the new set (its warm connections are as good as before);
 * the old set's other pools go when it stops. */

/* A refill that has neither connected nor finished its TLS handshake by
 * then is given up (a flow's own open has the flow's connect timeout). */
#define FILL_TIMEOUT 10.0

#define REAL(s) ((s)->owner != NULL ? (s)->owner : (s))

struct pooled_open {
    struct outbound_set *set; /* a reference while it runs: the proxy lives in it */
    const struct outbound_proxy *p;
    struct outbound_transport *t;
    struct outbound_hs *hs;   /* SOCKS5: the greeting ahead of the flow */
    struct io_stream *s;      /* the transport while it runs */
    struct ev_loop *loop;
    ev_timer timer;
    pool_conn_cb cb;
    void *arg;
};

static void
finish(struct pooled_open *po, struct io_stream *s, int err, const char *why)
{
    struct outbound_set *set = po->set;
    pool_conn_cb cb = po->cb;
    void *arg = po->arg;

    ev_timer_stop(po->loop, &po->timer);
    free(po);
    cb(arg, s, err, why);
    outbound_set_unref(set); /* after: the pool may still be in it */
}

static void
on_greeted(void *arg, int err, const char *why, const uint8_t *extra, size_t extra_len)
{
    struct pooled_open *po = arg;
    struct io_stream *s = po->s;

    po->hs = NULL;
    po->s = NULL;
    if (err == 0 && extra_len > 0) {
        err = EPROTO;
        why = "socks5: proxy sent bytes after its greeting reply";
    }
    if (err != 0) {
        io_close(s, 1);
        s = NULL;
    }
    finish(po, s, err, why);
}

/* SOCKS5 connections are greeted (and authenticated) before they go into
 * the pool: a flow then sends its CONNECT only (open.c). HTTP CONNECT has
 * nothing to do ahead of the request, so its pool holds bare TCP (or TLS)
 * connections; Shadowsocks and Trojan send their header with the data. */
static void
on_open(void *arg, struct io_stream *s, int err, const char *why)
{
    struct pooled_open *po = arg;

    po->t = NULL;
    if (s == NULL || po->p->type != OUTBOUND_SOCKS5) {
        finish(po, s, err, why);
        return;
    }
    po->s = s;
    po->hs = outbound_socks5_greet(s, po->p, on_greeted, po);
    if (po->hs == NULL) {
        po->s = NULL;
        io_close(s, 1);
        finish(po, NULL, ENOMEM, "out of memory");
    }
}

static void
on_fill_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct pooled_open *po = w->data;
    const char *why =
        po->t != NULL ? outbound_transport_timeout_why(po->t) : "socks5: greeting timeout";

    if (po->t != NULL)
        outbound_transport_cancel(po->t);
    if (po->hs != NULL)
        outbound_hs_cancel(po->hs);
    if (po->s != NULL)
        io_close(po->s, 1);
    po->t = NULL;
    po->hs = NULL;
    po->s = NULL;
    finish(po, NULL, ETIMEDOUT, why);
}

static void *
slot_open(void *ud, pool_conn_cb cb, void *arg)
{
    struct pool_slot *sl = ud;
    struct outbound_set *s = sl->set;
    const struct outbound_proxy *p = &s->proxies[sl->idx];
    const char *const *alpn;
    size_t nalpn;
    int tls;
    struct pooled_open *po;

    if (s->env == NULL || (po = calloc(1, sizeof(*po))) == NULL)
        return NULL;
    outbound_transport_kind(p, &tls, &alpn, &nalpn);
    po->cb = cb;
    po->arg = arg;
    po->p = p;
    po->t = outbound_transport_open(s->env, p, NULL, tls, alpn, nalpn, FILL_TIMEOUT, on_open, po);
    if (po->t == NULL) {
        free(po);
        return NULL;
    }
    po->set = outbound_set_ref(s);
    po->loop = s->env->loop;
    ev_timer_init(&po->timer, on_fill_timeout, FILL_TIMEOUT, 0);
    po->timer.data = po;
    ev_timer_start(po->loop, &po->timer);
    return po;
}

static void
slot_cancel(void *handle)
{
    struct pooled_open *po = handle;
    struct outbound_set *set = po->set;

    ev_timer_stop(po->loop, &po->timer);
    if (po->t != NULL)
        outbound_transport_cancel(po->t);
    if (po->hs != NULL)
        outbound_hs_cancel(po->hs);
    if (po->s != NULL)
        io_close(po->s, 1);
    free(po);
    outbound_set_unref(set);
}

static const struct pool_connector connector = {.open = slot_open, .cancel = slot_cancel};

static int
ensure_slots(struct outbound_set *s)
{
    if (s->pools != NULL)
        return 0;
    s->pools = calloc(s->nproxies ? s->nproxies : 1, sizeof(*s->pools));
    if (s->pools == NULL)
        return -1;
    for (size_t i = 0; i < s->nproxies; i++)
        s->pools[i] = (struct pool_slot){.set = s, .idx = i};
    return 0;
}

struct pool *
outbound_set_pool(struct outbound_set *s, int policy)
{
    s = REAL(s);
    if (!s->running || s->env == NULL || policy < FLOW_POLICY__BUILTIN ||
        (size_t)policy - FLOW_POLICY__BUILTIN >= s->nproxies)
        return NULL;
    size_t i = (size_t)policy - FLOW_POLICY__BUILTIN;
    const struct outbound_proxy *p = &s->proxies[i];
    if (!p->pool.enabled || ensure_slots(s) != 0)
        return NULL;
    if (s->pools[i].pool == NULL) {
        int tls;
        const char *const *alpn;
        size_t nalpn;
        outbound_transport_kind(p, &tls, &alpn, &nalpn);
        s->pools[i].pool = pool_new(s->env->loop, &p->pool, tls, &connector, &s->pools[i]);
    }
    return s->pools[i].pool;
}

/* Whether a connection made for |a| is as good for |b|: same server, same
 * credentials, same TLS settings, same pool settings. Proxies with a CA
 * file of their own never match (the file may have changed). */
int
outbound_set_same_proxy(const struct outbound_proxy *a, const struct outbound_proxy *b)
{
    char ha[FLOW_NAME_MAX + 1], hb[FLOW_NAME_MAX + 1];

    flow_addr_host(&a->server, ha, sizeof(ha));
    flow_addr_host(&b->server, hb, sizeof(hb));
    return a->type == b->type && strcmp(ha, hb) == 0 && a->server.port == b->server.port &&
           strcmp(a->user, b->user) == 0 && strcmp(a->pass, b->pass) == 0 && a->tls == b->tls &&
           strcmp(a->sni, b->sni) == 0 && a->skip_cert_verify == b->skip_cert_verify &&
           a->anchors == NULL && b->anchors == NULL && a->cipher == b->cipher &&
           a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0 &&
           strcmp(a->trojan_hash, b->trojan_hash) == 0 && a->pool.enabled == b->pool.enabled &&
           a->pool.max_idle == b->pool.max_idle && a->pool.idle_timeout == b->pool.idle_timeout;
}

void
outbound_set_pools_carry(struct outbound_set *s, struct outbound_set *prev)
{
    prev = REAL(prev);
    if (prev == s || prev->pools == NULL)
        return;
    for (size_t j = 0; j < s->nproxies; j++) {
        int id = outbound_set_lookup(prev, s->proxies[j].name);
        if (id < FLOW_POLICY__BUILTIN || (size_t)id - FLOW_POLICY__BUILTIN >= prev->nproxies)
            continue;
        struct pool_slot *old = &prev->pools[id - FLOW_POLICY__BUILTIN];
        if (old->pool == NULL ||
            !outbound_set_same_proxy(&prev->proxies[old->idx], &s->proxies[j]) ||
            ensure_slots(s) != 0)
            continue;
        s->pools[j].pool = old->pool;
        old->pool = NULL;
        pool_rebind(s->pools[j].pool, &s->pools[j]);
    }
}

void
outbound_set_pools_drop(struct outbound_set *s)
{
    if (s->pools == NULL)
        return;
    for (size_t i = 0; i < s->nproxies; i++) {
        struct pool *p = s->pools[i].pool;
        s->pools[i].pool = NULL;
        pool_free(p);
    }
}

void
outbound_set_pool_drain(struct outbound_set *s, int policy)
{
    s = REAL(s);
    if (s->pools != NULL && policy >= FLOW_POLICY__BUILTIN &&
        (size_t)policy - FLOW_POLICY__BUILTIN < s->nproxies &&
        s->pools[policy - FLOW_POLICY__BUILTIN].pool != NULL)
        pool_drain(s->pools[policy - FLOW_POLICY__BUILTIN].pool);
}

void
outbound_set_pools_describe(const struct outbound_set *s, char *buf, size_t len)
{
    size_t off = 0;

    if (len == 0)
        return;
    buf[0] = '\0';
    s = REAL(s);
    for (size_t i = 0; s->pools != NULL && i < s->nproxies && off + 1 < len; i++) {
        if (s->pools[i].pool == NULL)
            continue;
        struct pool_stats st;
        pool_stats(s->pools[i].pool, &st);
        const struct log_counter_group g[] = {{"", pool_counters, &st, NULL}};
        int n = snprintf(buf + off, len - off, "%s%s", off ? "\n" : "", s->proxies[i].name);
        if (n < 0 || (size_t)n >= len - off)
            break;
        off += (size_t)n;
        off = log_counters_format(buf, len, g, 1);
    }
}

int
outbound_set_pool_stats(const struct outbound_set *s, const char *proxy, struct pool_stats *out)
{
    s = REAL(s);
    int id = outbound_set_lookup(s, proxy);
    if (s->pools == NULL || id < FLOW_POLICY__BUILTIN ||
        (size_t)id - FLOW_POLICY__BUILTIN >= s->nproxies ||
        s->pools[id - FLOW_POLICY__BUILTIN].pool == NULL)
        return -1;
    pool_stats(s->pools[id - FLOW_POLICY__BUILTIN].pool, out);
    return 0;
}
