#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dns/resolve_int.h"

#define GRACE 0.05             /* RFC 8305 §3 "Resolution Delay" for the other family */
#define CNAME_HOPS 16
#define EDNS_UDP_SIZE 1232     /* avoids IP fragmentation (DNS flag day 2020) */

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

static double
now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint32_t
lookup_hash(const char *name, uint16_t type)
{
    uint32_t h = 2166136261u ^ type;
    for (const char *p = name; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return h % LOOKUP_BUCKETS;
}

static void
unhash(struct lookup *lk)
{
    if (lk->hpprev == NULL)
        return;
    *lk->hpprev = lk->hnext;
    if (lk->hnext != NULL)
        lk->hnext->hpprev = lk->hpprev;
    lk->hpprev = NULL;
}

static void
waiter_add(struct lookup *lk, struct waiter *w, struct dns_query *q)
{
    w->lk = lk;
    w->q = q;
    w->next = lk->waiters;
    if (w->next != NULL)
        w->next->pprev = &w->next;
    w->pprev = &lk->waiters;
    lk->waiters = w;
}

static void
waiter_del(struct waiter *w)
{
    if (w->lk == NULL)
        return;
    *w->pprev = w->next;
    if (w->next != NULL)
        w->next->pprev = w->pprev;
    w->lk = NULL;
}

/* A cancelled query's lookup that nobody else waits for stops: its socket
 * and timer are not held for the upstream timeout on behalf of no one (a
 * flood of names to a slow upstream, each query dropped, held one per
 * name). A delivered query's lookup goes on: the other family's answer
 * still fills the cache. lookup_done clears lk->x first, so a lookup
 * delivering stays. */
static void
waiter_leave(struct waiter *w)
{
    struct lookup *lk = w->lk;
    waiter_del(w);
    if (lk != NULL && lk->waiters == NULL && lk->x != NULL) {
        unhash(lk);
        dns_exchange_cancel(lk->x);
        lk->r->st.abandoned++;
        free(lk);
    }
}

static void on_query_timer(struct ev_loop *loop, ev_timer *w, int revents);

static struct dns_query *
query_new(struct dns_resolver *r, int kind, size_t extra)
{
    struct dns_query *q = calloc(1, sizeof(*q) + extra);
    if (q == NULL)
        return NULL;
    q->r = r;
    q->kind = kind;
    ev_init(&q->tm, on_query_timer);
    q->next = r->queries;
    if (q->next != NULL)
        q->next->pprev = &q->next;
    q->pprev = &r->queries;
    r->queries = q;
    return q;
}

static void
query_free(struct dns_query *q)
{
    ev_timer_stop(q->r->loop, &q->tm);
    waiter_del(&q->slot[SLOT6].w);
    waiter_del(&q->slot[SLOT4].w);
    *q->pprev = q->next;
    if (q->next != NULL)
        q->next->pprev = q->pprev;
    free(q->resp);
    free(q);
}

static void
revmap_feed(struct dns_resolver *r, const struct dns_msg *m, const char *asked)
{
    for (size_t i = 0; i < m->nan; i++) {
        const struct dns_rr *rr = &m->rr[i];
        if (rr->klass != DNS_CLASS_IN)
            continue;
        if (rr->type == DNS_TYPE_A && rr->rdlen == 4)
            dns_revmap_put(r->rev, rr->rdata, 4, asked);
        else if (rr->type == DNS_TYPE_AAAA && rr->rdlen == 16)
            dns_revmap_put(r->rev, rr->rdata, 6, asked);
    }
}

/* see resolve_int.h */
void
dns_resolve_extract(const uint8_t *buf, size_t len, const struct dns_msg *m, const char *name,
                    uint16_t type, struct slot *s, struct dns_addr *out)
{
    s->state = S_DONE;
    s->n = 0;
    int rcode = DNS_RCODE(m->flags);
    if (rcode == DNS_RCODE_NXDOMAIN) {
        s->nx = 1;
        s->err = dns_err_not_found;
        return;
    }
    if (rcode != DNS_RCODE_NOERROR) {
        s->err = dns_err_servfail;
        return;
    }
    char target[DNS_NAME_MAX + 1];
    snprintf(target, sizeof(target), "%s", name);
    for (int hop = 0; hop < CNAME_HOPS; hop++) {
        size_t i;
        for (i = 0; i < m->nan; i++)
            if (m->rr[i].type == DNS_TYPE_CNAME && m->rr[i].klass == DNS_CLASS_IN &&
                strcmp(m->rr[i].name, target) == 0)
                break;
        if (i == m->nan)
            break;
        size_t off = m->rr[i].rdata_off;
        if (dns_name_read(buf, len, &off, target, sizeof(target)) != 0) {
            /* Too long as text (escapes): no record owns it, and |target|
             * now holds a cut, unterminated copy. */
            s->err = dns_err_not_found;
            return;
        }
    }
    size_t alen = type == DNS_TYPE_A ? 4 : 16;
    for (size_t i = 0; i < m->nan && s->n < DNS_MAX_ADDRS; i++) {
        const struct dns_rr *rr = &m->rr[i];
        if (rr->type != type || rr->klass != DNS_CLASS_IN || rr->rdlen != alen ||
            strcmp(rr->name, target) != 0)
            continue;
        out[s->n] = (struct dns_addr){.version = type == DNS_TYPE_A ? 4 : 6};
        memcpy(out[s->n].ip, rr->rdata, alen);
        s->n++;
    }
    s->err = s->n > 0 ? NULL : dns_err_not_found; /* NODATA */
}

static void
to_sockaddr(const struct dns_addr *a, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (a->version == 4) {
        struct sockaddr_in *s = (struct sockaddr_in *)ss;
        s->sin_family = AF_INET;
        memcpy(&s->sin_addr, a->ip, 4);
    } else {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
        s->sin6_family = AF_INET6;
        memcpy(&s->sin6_addr, a->ip, 16);
        s->sin6_scope_id = a->scope;
    }
}

/* Frees |q|, then calls back with v6 and v4 interleaved (RFC 8305 §4). */
static void
deliver_resolve(struct dns_query *q)
{
    struct sockaddr_storage out[DNS_MAX_ADDRS];
    size_t n = 0, i6 = 0, i4 = 0;
    struct slot *s6 = &q->slot[SLOT6], *s4 = &q->slot[SLOT4];
    while (n < DNS_MAX_ADDRS && (i6 < s6->n || i4 < s4->n)) {
        if (i6 < s6->n)
            to_sockaddr(&q->addr[SLOT6][i6++], &out[n++]);
        if (i4 < s4->n && n < DNS_MAX_ADDRS)
            to_sockaddr(&q->addr[SLOT4][i4++], &out[n++]);
    }
    const char *err = q->err;
    if (err == NULL && n == 0) {
        if (s6->nx || s4->nx)
            err = dns_err_not_found;
        else if (s6->err == dns_err_timeout || s4->err == dns_err_timeout)
            err = dns_err_timeout;
        else if (s6->err == dns_err_servfail || s4->err == dns_err_servfail)
            err = dns_err_servfail;
        else
            err = dns_err_not_found;
    }
    dns_resolve_cb cb = q->rcb;
    void *arg = q->arg;
    query_free(q);
    cb(arg, err, n > 0 ? out : NULL, n);
}

/* Delivers when the answer is complete: both families in, or an NXDOMAIN;
 * with addresses for one family, waits GRACE for the other. |defer| when
 * inside dns_resolve(): delivery then waits for the loop. */
static void
resolve_check(struct dns_query *q, int defer)
{
    struct slot *s6 = &q->slot[SLOT6], *s4 = &q->slot[SLOT4];
    int ready = q->err != NULL || s6->nx || s4->nx || (s6->state != S_WAIT && s4->state != S_WAIT);
    if (ready && defer) {
        ev_timer_stop(q->r->loop, &q->tm);
        ev_timer_set(&q->tm, 0, 0);
        ev_timer_start(q->r->loop, &q->tm);
    } else if (ready) {
        deliver_resolve(q);
    } else if ((s6->n > 0 || s4->n > 0) && !ev_is_active(&q->tm)) {
        ev_timer_set(&q->tm, GRACE, 0);
        ev_timer_start(q->r->loop, &q->tm);
    }
}

/* Puts the asker's question bytes back over the response's: same name,
 * but the asker's letter case (clients using 0x20 randomisation check). */
static void
restore_question(const struct dns_query *q, uint8_t *p, size_t len)
{
    size_t off = DNS_HEADER_LEN;
    if (q->qwire_len == 0 || len < DNS_HEADER_LEN || (p[4] << 8 | p[5]) == 0)
        return;
    while (off < len && p[off] != 0 && (p[off] & 0xC0) == 0)
        off += (size_t)p[off] + 1;
    if (off >= len || p[off] != 0)
        return;
    off += 1 + 4;
    if (off <= len && off - DNS_HEADER_LEN == q->qwire_len)
        memcpy(p + DNS_HEADER_LEN, q->qwire, q->qwire_len);
}

/* Frees |q|, then calls back with a copy of |resp| carrying the asker's ID. */
static void
deliver_forward(struct dns_query *q, const uint8_t *resp, size_t len, const char *err)
{
    uint8_t *copy = NULL;
    if (resp != NULL && q->resp == resp) {
        copy = q->resp; /* already ours, already patched */
        q->resp = NULL;
    } else if (resp != NULL) {
        copy = malloc(len);
        if (copy == NULL) {
            err = dns_err_nomem;
            len = 0;
        } else {
            memcpy(copy, resp, len);
            copy[0] = (uint8_t)(q->id >> 8);
            copy[1] = (uint8_t)q->id;
            restore_question(q, copy, len);
        }
    }
    dns_forward_cb cb = q->fcb;
    void *arg = q->arg;
    query_free(q);
    cb(arg, copy, copy != NULL ? len : 0, copy != NULL ? NULL : err);
    free(copy);
}

static void
on_query_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct dns_query *q = CONTAINER(w, struct dns_query, tm);
    if (q->kind == Q_FORWARD)
        deliver_forward(q, q->resp, q->resp_len, q->err);
    else
        deliver_resolve(q); /* ready, or the grace period is over */
}

static void
lookup_done(void *arg, const uint8_t *resp, size_t len, const char *err)
{
    struct lookup *lk = arg;
    struct dns_resolver *r = lk->r;
    lk->x = NULL;
    unhash(lk); /* a query started from a callback below starts afresh */
    struct dns_msg *m = NULL, mbuf;
    if (resp != NULL && dns_msg_parse(&mbuf, resp, len) == 0) {
        m = &mbuf;
        if (lk->shared && r->cache != NULL)
            dns_cache_put(r->cache, lk->name, lk->type, resp, len, now_mono());
        revmap_feed(r, m, lk->shared ? lk->name : m->qname);
    }
    struct slot res = {.state = S_DONE, .err = err != NULL ? err : dns_err_servfail};
    struct dns_addr addrs[DNS_MAX_ADDRS];
    if (m != NULL && (lk->type == DNS_TYPE_A || lk->type == DNS_TYPE_AAAA))
        dns_resolve_extract(resp, len, m, lk->name, lk->type, &res, addrs);
    r->depth++;
    struct waiter *w;
    while ((w = lk->waiters) != NULL && !r->dying) {
        struct dns_query *q = w->q;
        waiter_del(w);
        if (q->kind == Q_FORWARD) {
            deliver_forward(q, resp, len, err != NULL ? err : resp == NULL ? dns_err_servfail : NULL);
            continue;
        }
        struct slot *s = CONTAINER(w, struct slot, w);
        s->state = S_DONE;
        s->n = res.n, s->nx = res.nx, s->err = res.err;
        memcpy(q->addr[s == &q->slot[SLOT6] ? SLOT6 : SLOT4], addrs, res.n * sizeof(addrs[0]));
        resolve_check(q, 0);
    }
    free(lk);
    if (--r->depth == 0 && r->dying)
        dns_resolver_free(r);
}

/* The lookup for (name, type), joined if one is in flight. |raw| is a
 * forwarded query to send as is (a private lookup), else NULL. */
static struct lookup *
lookup_get(struct dns_resolver *r, const char *name, uint16_t type, const uint8_t *raw, size_t rawlen)
{
    uint32_t h = lookup_hash(name, type);
    if (raw == NULL) {
        for (struct lookup *lk = r->lookups[h]; lk != NULL; lk = lk->hnext)
            if (lk->shared && lk->type == type && strcmp(lk->name, name) == 0)
                return lk;
    }
    struct lookup *lk = calloc(1, sizeof(*lk));
    if (lk == NULL)
        return NULL;
    lk->r = r;
    lk->type = type;
    lk->shared = raw == NULL;
    snprintf(lk->name, sizeof(lk->name), "%s", name);
    uint8_t q[DNS_HEADER_LEN + DNS_NAME_MAX + 2 + 4 + 11];
    if (raw == NULL) {
        int n = dns_build_query(q, sizeof(q), 0, name, type, EDNS_UDP_SIZE);
        if (n < 0) {
            free(lk);
            return NULL;
        }
        raw = q, rawlen = (size_t)n;
    }
    lk->x = dns_exchange_start(&r->up, raw, rawlen, lookup_done, lk);
    if (lk->x == NULL) {
        free(lk);
        return NULL;
    }
    lk->hnext = r->lookups[h];
    if (lk->hnext != NULL)
        lk->hnext->hpprev = &lk->hnext;
    lk->hpprev = &r->lookups[h];
    r->lookups[h] = lk;
    return lk;
}

/* Lower-case, no final dot, and a valid wire name; 0 or -1. */
static int
normalize(const char *name, char *out)
{
    size_t len = strlen(name);
    if (len > 0 && name[len - 1] == '.')
        len--;
    if (len == 0 || len > DNS_NAME_MAX - 2)
        return -1;
    for (size_t i = 0; i < len; i++)
        out[i] = (char)tolower((unsigned char)name[i]);
    out[len] = '\0';
    uint8_t wire[DNS_NAME_MAX + 2];
    return dns_name_write(wire, sizeof(wire), out) < 0 ? -1 : 0;
}

/* Hosts-file addresses into the slots, the unreachable family dropped
 * unless nothing else is left. */
static void
fill_from_hosts(struct dns_query *q, const struct dns_addr *a, size_t n, unsigned families)
{
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            int six = a[i].version == 6;
            if (pass == 0 && !(families & (six ? DNS_FAMILY_V6 : DNS_FAMILY_V4)))
                continue;
            struct slot *s = &q->slot[six ? SLOT6 : SLOT4];
            if (s->n < DNS_MAX_ADDRS)
                q->addr[six ? SLOT6 : SLOT4][s->n++] = a[i];
        }
        if (q->slot[SLOT6].n + q->slot[SLOT4].n > 0)
            return;
    }
}

struct dns_query *
dns_resolve(struct dns_resolver *r, const char *name, dns_resolve_cb cb, void *arg)
{
    struct dns_query *q = query_new(r, Q_RESOLVE, 0);
    if (q == NULL)
        return NULL;
    q->rcb = cb;
    q->arg = arg;
    r->st.queries++;
    struct dns_addr a[DNS_MAX_ADDRS];
    char norm[DNS_NAME_MAX + 1];
    size_t n;
    if (dns_addr_parse(name, &a[0]) == 0) {
        fill_from_hosts(q, a, 1, DNS_FAMILY_V4 | DNS_FAMILY_V6);
        q->slot[SLOT6].state = q->slot[SLOT4].state = S_DONE;
    } else if (normalize(name, norm) != 0) {
        q->err = dns_err_not_found;
    } else if ((n = dns_hosts_lookup(r->hosts, norm, a, DNS_MAX_ADDRS)) > 0) {
        r->st.hosts_hits++;
        fill_from_hosts(q, a, n, r->families);
        q->slot[SLOT6].state = q->slot[SLOT4].state = S_DONE;
    } else {
        static const uint16_t types[2] = {[SLOT6] = DNS_TYPE_AAAA, [SLOT4] = DNS_TYPE_A};
        static const unsigned fam[2] = {[SLOT6] = DNS_FAMILY_V6, [SLOT4] = DNS_FAMILY_V4};
        for (int i = 0; i < 2; i++) {
            struct slot *s = &q->slot[i];
            if (!(r->families & fam[i]))
                continue;
            size_t len;
            const uint8_t *p = r->cache != NULL
                                   ? dns_cache_peek(r->cache, norm, types[i], now_mono(), &len)
                                   : NULL;
            struct dns_msg m;
            if (p != NULL && dns_msg_parse(&m, p, len) == 0) {
                r->st.cache_hits++;
                dns_resolve_extract(p, len, &m, norm, types[i], s, q->addr[i]);
                revmap_feed(r, &m, norm);
                continue;
            }
            r->st.cache_misses++;
            struct lookup *lk = lookup_get(r, norm, types[i], NULL, 0);
            if (lk == NULL) {
                query_free(q);
                return NULL;
            }
            waiter_add(lk, &s->w, q);
            s->state = S_WAIT;
        }
    }
    resolve_check(q, 1);
    return q;
}

struct dns_query *
dns_forward(struct dns_resolver *r, const uint8_t *raw, size_t len, dns_forward_cb cb, void *arg)
{
    struct dns_msg m;
    if (dns_msg_parse(&m, raw, len) != 0)
        return NULL;
    size_t qwire = m.qdcount > 0 ? m.question_end - DNS_HEADER_LEN : 0;
    struct dns_query *q = query_new(r, Q_FORWARD, qwire);
    if (q == NULL)
        return NULL;
    r->st.queries++;
    q->fcb = cb;
    q->arg = arg;
    q->id = m.id;
    q->qwire_len = qwire;
    memcpy(q->qwire, raw + DNS_HEADER_LEN, qwire);
    /* Only plain IN questions share lookups and the cache; anything else
     * goes upstream as sent. */
    int plain = m.qdcount == 1 && DNS_OPCODE(m.flags) == 0 && !(m.flags & DNS_FLAG_QR) &&
                m.qclass == DNS_CLASS_IN && m.qtype != DNS_TYPE_ANY && m.qtype != DNS_TYPE_OPT;
    if (plain && r->cache != NULL) {
        double now = now_mono();
        size_t clen;
        if (dns_cache_peek(r->cache, m.qname, m.qtype, now, &clen) != NULL &&
            (q->resp = malloc(clen)) != NULL) {
            int n = dns_cache_get(r->cache, m.qname, m.qtype, now, m.id, q->resp, clen);
            if (n > 0) {
                r->st.cache_hits++;
                q->resp_len = (size_t)n;
                restore_question(q, q->resp, q->resp_len);
                struct dns_msg cm;
                if ((m.qtype == DNS_TYPE_A || m.qtype == DNS_TYPE_AAAA) &&
                    dns_msg_parse(&cm, q->resp, q->resp_len) == 0)
                    revmap_feed(r, &cm, m.qname);
                ev_timer_set(&q->tm, 0, 0);
                ev_timer_start(r->loop, &q->tm);
                return q;
            }
            free(q->resp);
            q->resp = NULL;
        }
    }
    if (plain)
        r->st.cache_misses++;
    struct lookup *lk = plain ? lookup_get(r, m.qname, m.qtype, NULL, 0)
                              : lookup_get(r, m.qname, m.qtype, raw, len);
    if (lk == NULL) {
        query_free(q);
        return NULL;
    }
    waiter_add(lk, &q->slot[0].w, q);
    return q;
}

void
dns_query_cancel(struct dns_query *q)
{
    if (q == NULL)
        return;
    waiter_leave(&q->slot[SLOT6].w);
    waiter_leave(&q->slot[SLOT4].w);
    query_free(q);
}

void
dns_resolver_drop_all(struct dns_resolver *r)
{
    while (r->queries != NULL)
        query_free(r->queries);
    for (size_t i = 0; i < LOOKUP_BUCKETS; i++) {
        struct lookup *lk;
        while ((lk = r->lookups[i]) != NULL) {
            unhash(lk);
            dns_exchange_cancel(lk->x);
            free(lk);
        }
    }
}
