#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns/dns.h"
#include "dns/fakeip.h"
#include "dns/msg.h"
#include "dns/server_int.h"
#include "log/log.h"
#include "rules/rules.h"

/* The answer to one query: fake-IP for A/AAAA of names not excluded,
 * chute.on_dns's decision when it made one, else the upstreams through the
 * resolver's cache. Fake answers never touch the network. */

#define HOOK_CACHE_MAX 8192
#define HOOK_TTL 60
#define NEG_TTL 30
#define PENDING_LOG_GAP 10.0 /* seconds between two "too many waiting" lines */

struct hook_entry {
    struct hook_entry *next;
    struct dns_hook_result r;
    char name[];
};

/* A query waiting for the upstream: the asker's context rides along. */
struct pending {
    struct dns_server *s;
    dns_answer_cb cb;
    size_t max;
    size_t ctx_len;
    int edns;        /* the asker sent an OPT record */
    struct pending *prev, *next;
    struct dns_query *q;
    unsigned char ctx[DNS_CTX_MAX];
    size_t qlen;
    uint8_t query[]; /* for a SERVFAIL when the upstreams fail */
};

static uint32_t
hash_name(const char *n)
{
    uint32_t h = 2166136261u;
    for (; *n; n++)
        h = (h ^ (uint8_t)*n) * 16777619u;
    return h;
}

static void
hook_clear(struct dns_server *s)
{
    for (size_t i = 0; i < DNS_HOOK_BUCKETS; i++) {
        while (s->hooks[i] != NULL) {
            struct hook_entry *h = s->hooks[i];
            s->hooks[i] = h->next;
            free(h);
        }
    }
    s->nhooks = 0;
}

/* chute.on_dns, once per name (the contract: a decision is about
 * a name; q.type says which query asked first): cached until a reload. */
static const struct dns_hook_result *
hook_lookup(struct dns_server *s, const char *name, uint16_t qtype)
{
    if (s->hook == NULL)
        return NULL;
    uint32_t b = hash_name(name) % DNS_HOOK_BUCKETS;
    for (struct hook_entry *h = s->hooks[b]; h != NULL; h = h->next)
        if (strcmp(h->name, name) == 0)
            return &h->r;
    if (s->nhooks >= HOOK_CACHE_MAX)
        hook_clear(s); /* a flood of distinct names: start over rather than grow */
    size_t n = strlen(name) + 1;
    struct hook_entry *h = malloc(sizeof(*h) + n);
    if (h == NULL)
        return NULL;
    memset(&h->r, 0, sizeof(h->r));
    memcpy(h->name, name, n);
    s->hook(s->hook_arg, name, qtype, &h->r);
    h->next = s->hooks[b];
    s->hooks[b] = h;
    s->nhooks++;
    return &h->r;
}

void
dns_server_set_hook(struct dns_server *s, dns_hook_fn fn, void *arg)
{
    hook_clear(s);
    s->hook = fn;
    s->hook_arg = arg;
}

static int
excluded(const struct dns_server *s, const char *name)
{
    uint32_t tag;
    return s->exclude != NULL && rules_domains_match(s->exclude, name, strlen(name), &tag);
}

static void
reply(dns_answer_cb cb, const void *ctx, uint8_t *msg, int len, size_t max, const char *how)
{
    if (len <= 0)
        return;
    size_t n = dns_msg_truncate(msg, (size_t)len, max);
    dns_server_log_answer(msg, n, how);
    cb(ctx, msg, n);
}

static void
unlink_pending(struct dns_server *s, struct pending *p)
{
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        s->pend = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    else
        s->pend_tail = p->prev;
    s->npend--;
}

/* The upstream answered chute's own query, which had an OPT record; an
 * asker who sent none must get none back (RFC 6891 7). The OPT record is
 * the last one in practice: only then is it cut. */
static size_t
strip_opt(struct dns_server *s, uint8_t *msg, size_t len)
{
    struct dns_msg *m = &s->msg;
    if (dns_msg_parse(m, msg, len) != 0 || !m->has_edns || m->nrr == 0)
        return len;
    const struct dns_rr *rr = &m->rr[m->nrr - 1];
    if (rr->type != DNS_TYPE_OPT || rr->rdata_off + rr->rdlen != len || m->arcount == 0 ||
        (m->nrr == 1 && m->qdcount > 1))
        return len;
    /* It starts where the record or question before it ends: its owner,
     * the root, may be spelled as a 2-byte pointer to one. */
    const struct dns_rr *before = m->nrr > 1 ? &m->rr[m->nrr - 2] : NULL;
    size_t start = before != NULL ? before->rdata_off + before->rdlen : m->question_end;
    msg[10] = (uint8_t)((m->arcount - 1) >> 8);
    msg[11] = (uint8_t)(m->arcount - 1);
    return start;
}

/* SERVFAIL keeps clients from waiting out their own timeout. */
static void
answer_servfail(struct dns_server *s, struct pending *p, const char *why)
{
    if (dns_msg_parse(&s->msg, p->query, p->qlen) != 0)
        return;
    s->st.servfail++;
    reply(p->cb, p->ctx, s->out,
          dns_build_error(s->out, sizeof(s->out), &s->msg, DNS_RCODE_SERVFAIL, 0), p->max, why);
}

static void
on_forwarded(void *arg, const uint8_t *resp, size_t len, const char *err)
{
    struct pending *p = arg;
    struct dns_server *s = p->s;
    unlink_pending(s, p);
    if (resp != NULL) {
        uint8_t *out = s->out;
        memcpy(out, resp, len);
        if (!p->edns)
            len = strip_opt(s, out, len);
        reply(p->cb, p->ctx, out, (int)len, p->max, "forwarded");
    } else {
        answer_servfail(s, p, err != NULL ? err : "upstream failed");
    }
    free(p);
}

/* The cap on waiting queries: a flood of names to a slow upstream would
 * otherwise hold a socket and a buffer per name for the upstream timeout.
 * The oldest goes first: it is the closest to timing out anyway. */
static void
drop_oldest(struct dns_server *s)
{
    struct pending *p = s->pend;
    unlink_pending(s, p);
    dns_query_cancel(p->q);
    s->st.pending_dropped++;
    double now = ev_now(s->loop);
    if (s->pend_logged == 0 || now - s->pend_logged >= PENDING_LOG_GAP) {
        s->pend_logged = now;
        LOG_WARN("dns: %zu forwarded queries are waiting for the upstreams (the cap): the oldest "
                 "is answered SERVFAIL (%llu so far; a slow or dead upstream?)",
                 s->max_pending, (unsigned long long)s->st.pending_dropped);
    }
    answer_servfail(s, p, "too many queries waiting");
    free(p);
}

static void
forward(struct dns_server *s, const uint8_t *q, size_t len, size_t max, dns_answer_cb cb,
        const void *ctx, size_t ctx_len)
{
    int edns = s->msg.has_edns; /* s->msg holds this query, parsed by the caller */
    while (s->npend >= s->max_pending)
        drop_oldest(s); /* reuses s->msg */
    struct pending *p = malloc(sizeof(*p) + len);
    if (p == NULL) {
        s->st.dropped++;
        return;
    }
    p->s = s;
    p->cb = cb;
    p->max = max;
    p->ctx_len = ctx_len;
    p->edns = edns;
    memcpy(p->ctx, ctx, ctx_len);
    p->qlen = len;
    memcpy(p->query, q, len);
    p->next = NULL;
    p->prev = s->pend_tail;
    if (s->pend_tail != NULL)
        s->pend_tail->next = p;
    else
        s->pend = p;
    s->pend_tail = p;
    s->npend++;
    s->st.forwarded++;
    p->q = dns_forward(s->r, q, len, on_forwarded, p);
    if (p->q == NULL) {
        unlink_pending(s, p);
        free(p);
        s->st.dropped++;
    }
}

/* Addresses from the hook for the query's family (NODATA for the other). */
static int
hook_answer(struct dns_server *s, const struct dns_msg *m, const struct dns_hook_result *h)
{
    uint8_t addrs[DNS_HOOK_MAX_ADDRS * 16];
    size_t n = 0;
    if (m->qtype == DNS_TYPE_A)
        for (n = 0; n < h->n4; n++)
            memcpy(addrs + 4 * n, h->v4[n], 4);
    else if (m->qtype == DNS_TYPE_AAAA)
        for (n = 0; n < h->n6; n++)
            memcpy(addrs + 16 * n, h->v6[n], 16);
    return dns_build_addrs(s->out, sizeof(s->out), m, addrs, n, HOOK_TTL);
}

void
dns_server_query(struct dns_server *s, const uint8_t *q, size_t len, size_t max, int udp,
                 dns_answer_cb cb, const void *ctx, size_t ctx_len)
{
    struct dns_msg *m = &s->msg;
    s->st.queries++;
    if (ctx_len > DNS_CTX_MAX || len < DNS_HEADER_LEN) {
        s->st.dropped++;
        return;
    }
    int parsed = dns_msg_parse(m, q, len) == 0;
    if (udp) { /* what the asker said it takes (RFC 6891), 512 without EDNS0 */
        size_t said = parsed && m->has_edns ? m->edns_udp_size : DNS_UDP_MAX;
        said = said < DNS_UDP_MAX ? DNS_UDP_MAX : said > 4096 ? 4096 : said;
        if (said < max)
            max = said;
    }
    if (max < DNS_UDP_MAX)
        max = DNS_UDP_MAX;
    if (!parsed || m->qdcount != 1 || (m->flags & DNS_FLAG_QR)) {
        s->st.formerr++;
        if (q[2] & 0x80) /* a response sent to us: never answer one (loops) */
            return;
        reply(cb, ctx, s->out, dns_build_formerr(s->out, sizeof(s->out), q, len), max, "malformed");
        return;
    }
    if (DNS_OPCODE(m->flags) != 0) {
        reply(cb, ctx, s->out, dns_build_error(s->out, sizeof(s->out), m, DNS_RCODE_NOTIMP, 0),
              max, "not a query");
        return;
    }
    int addr_q = m->qclass == DNS_CLASS_IN && (m->qtype == DNS_TYPE_A || m->qtype == DNS_TYPE_AAAA);
    const struct dns_hook_result *h = m->qname[0] ? hook_lookup(s, m->qname, m->qtype) : NULL;
    if (h != NULL && h->action == DNS_HOOK_BLOCK) {
        s->st.blocked++;
        reply(cb, ctx, s->out,
              dns_build_error(s->out, sizeof(s->out), m, DNS_RCODE_NXDOMAIN, NEG_TTL), max,
              "blocked by on_dns");
        return;
    }
    if (h != NULL && h->action == DNS_HOOK_ADDRS) {
        s->st.hook_answers++;
        if (addr_q)
            reply(cb, ctx, s->out, hook_answer(s, m, h), max, "on_dns");
        else
            reply(cb, ctx, s->out,
                  dns_build_error(s->out, sizeof(s->out), m, DNS_RCODE_NOERROR, HOOK_TTL), max,
                  "on_dns");
        return;
    }
    int fake = s->mode == DNS_MODE_FAKE_IP && m->qname[0] && strchr(m->qname, '.') != NULL &&
               !(h != NULL && h->action == DNS_HOOK_REAL) && !excluded(s, m->qname);
    if (fake && addr_q) {
        uint8_t ip[16];
        int v = m->qtype == DNS_TYPE_A ? 4 : 6;
        int n = dns_fakeip_addr(s->fake, m->qname, v, ip) == 0;
        s->st.fake_answers++;
        s->dirty = 1;
        reply(cb, ctx, s->out, dns_build_addrs(s->out, sizeof(s->out), m, ip, (size_t)n, s->fake_ttl),
              max, "fake-ip");
        return;
    }
    if (fake && m->qclass == DNS_CLASS_IN && m->qtype == DNS_TYPE_HTTPS) {
        /* HTTPS records carry address hints that would bypass the fake IP. */
        s->st.fake_answers++;
        reply(cb, ctx, s->out,
              dns_build_error(s->out, sizeof(s->out), m, DNS_RCODE_NOERROR, s->fake_ttl), max,
              "fake-ip: no HTTPS record");
        return;
    }
    forward(s, q, len, max, cb, ctx, ctx_len);
}

int
dns_server_is_fake(const struct dns_server *s, const uint8_t *ip, int version)
{
    return s->fake != NULL && dns_fakeip_contains(s->fake, ip, version);
}

const char *
dns_server_fake_name(struct dns_server *s, const uint8_t *ip, int version)
{
    return s->fake != NULL ? dns_fakeip_name(s->fake, ip, version) : NULL;
}

void
dns_server_reserve(struct dns_server *s, const uint8_t *ip, int version)
{
    if (s->fake != NULL && dns_fakeip_contains(s->fake, ip, version))
        dns_fakeip_reserve(s->fake, ip, version);
}

void
dns_server_count_fake_miss(struct dns_server *s)
{
    s->st.fake_misses++;
}

void
dns_server_stats(const struct dns_server *s, struct dns_server_stats *out)
{
    *out = s->st;
    out->pending = s->npend;
    if (s->fake != NULL) {
        struct dns_fakeip_stats fs;
        dns_fakeip_stats(s->fake, &fs);
        out->fake_entries = fs.entries;
        out->fake_bytes = fs.bytes;
    }
}

const struct log_counter dns_server_counters[] = {
#define X(field, key) LOG_COUNTER(struct dns_server_stats, field, key)
    DNS_SERVER_STATS(X)
#undef X
    LOG_COUNTER_END};

/* "+.name", "*.name", ".name": the name and below; "name": that name. */
static int
add_exclude(struct rules_domains *d, const char *e, uint32_t tag)
{
    enum rules_domain_kind k = RULES_DOMAIN_EXACT;
    if (strncmp(e, "+.", 2) == 0 || strncmp(e, "*.", 2) == 0)
        e += 2, k = RULES_DOMAIN_SUFFIX;
    else if (e[0] == '.')
        e += 1, k = RULES_DOMAIN_SUFFIX;
    return rules_domains_add(d, k, e, strlen(e), tag);
}

static void
on_save(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct dns_server *s = w->data;
    char err[256];
    if (!s->dirty || s->state_file == NULL)
        return;
    if (dns_fakeip_save(s->fake, s->state_file, err, sizeof(err)) != 0)
        LOG_WARN("dns: %s", err); /* the log, not bare stderr: a log_file or JSON has it */
    s->dirty = 0;
}

struct dns_server *
dns_server_new(struct ev_loop *loop, struct dns_resolver *r, const struct dns_server_opts *o,
               char *err, size_t errlen)
{
    struct dns_server *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->loop = loop;
    s->r = r;
    s->save_timer.data = s; /* dns_server_free saves through it, in any mode */
    s->mode = o->mode;
    s->fake_ttl = o->fake_ttl ? o->fake_ttl : 1;
    s->udp_fd = s->tcp_fd = -1;
    s->max_pending = o->max_pending ? o->max_pending : DNS_SERVER_PENDING_DEFAULT;
    if (o->mode == DNS_MODE_FAKE_IP) {
        s->fake = dns_fakeip_new(o->range4, o->range6[0] ? o->range6 : NULL, o->fake_max, err,
                                 errlen);
        if (s->fake == NULL)
            goto fail;
        if (o->state_file != NULL) {
            size_t skipped = 0;
            s->state_file = strdup(o->state_file);
            if (s->state_file == NULL ||
                dns_fakeip_load(s->fake, s->state_file, &skipped, err, errlen) != 0)
                goto fail;
            if (skipped > 0)
                LOG_WARN("dns: %s: %zu lines skipped", s->state_file, skipped);
        }
        s->exclude = rules_domains_new();
        if (s->exclude == NULL)
            goto fail;
        for (size_t i = 0; i < o->nexclude; i++)
            if (add_exclude(s->exclude, o->exclude[i], (uint32_t)i) != 0) {
                snprintf(err, errlen, "dns.exclude[%zu]: '%s' is not a name, +.name or *.name",
                         i + 1, o->exclude[i]);
                goto fail;
            }
        rules_domains_build(s->exclude);
        /* Saved now and then so a crash loses little; and at exit. */
        ev_timer_init(&s->save_timer, on_save, 30, 30);
        s->save_timer.data = s;
        if (s->state_file != NULL) {
            ev_timer_start(loop, &s->save_timer);
            ev_unref(loop);
        }
    }
    if (dns_server_listen(s, o->listen, err, errlen) != 0)
        goto fail;
    return s;
fail:
    /* A server that never ran must not write over the state it failed to read. */
    free(s->state_file);
    s->state_file = NULL;
    dns_server_free(s);
    return NULL;
}

void
dns_server_free(struct dns_server *s)
{
    if (s == NULL)
        return;
    if (ev_is_active(&s->save_timer)) {
        ev_ref(s->loop);
        ev_timer_stop(s->loop, &s->save_timer);
    }
    s->dirty = 1;
    on_save(s->loop, &s->save_timer, 0);
    dns_server_unlisten(s);
    while (s->pend != NULL) {
        struct pending *p = s->pend;
        unlink_pending(s, p);
        dns_query_cancel(p->q);
        free(p);
    }
    hook_clear(s);
    rules_domains_free(s->exclude);
    dns_fakeip_free(s->fake);
    free(s->state_file);
    free(s);
}
