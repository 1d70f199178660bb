#ifndef CHUTE_DNS_RESOLVE_INT_H
#define CHUTE_DNS_RESOLVE_INT_H

/* Folder-private: the resolver's state, shared by resolver.c (lifecycle,
 * configuration, stats) and resolve.c (lookups, dns_resolve, dns_forward). */

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "dns/cache.h"
#include "dns/dns.h"
#include "dns/hosts.h"
#include "dns/msg.h"
#include "dns/revmap.h"
#include "dns/upstream.h"

#define LOOKUP_BUCKETS 256

enum { SLOT6, SLOT4 };                 /* v6 first, as delivered */
enum { S_OFF, S_WAIT, S_DONE };
enum { Q_RESOLVE, Q_FORWARD };

struct lookup;

/* A query's place in the waiter list of an upstream lookup. */
struct waiter {
    struct waiter *next, **pprev;
    struct lookup *lk;
    struct dns_query *q;
};

/* One upstream exchange for (name, type), shared by every query that
 * wants it meanwhile. Forwarded queries that are not plain IN questions
 * get a private lookup that sends their own bytes and is never shared. */
struct lookup {
    struct lookup *hnext, **hpprev;
    struct dns_resolver *r;
    struct dns_exchange *x;
    struct waiter *waiters;
    int shared;
    uint16_t type;
    char name[DNS_NAME_MAX + 1];
};

struct slot {
    struct waiter w;
    uint8_t state, n, nx;
    const char *err;
};

struct dns_query {
    struct dns_query *next, **pprev;  /* all live queries, for dns_resolver_free */
    struct dns_resolver *r;
    ev_timer tm;                      /* deferred delivery, or the grace period */
    int kind;
    void *arg;
    dns_resolve_cb rcb;
    dns_forward_cb fcb;
    const char *err;                  /* an outcome known from the start */
    /* Q_RESOLVE */
    struct slot slot[2];
    struct dns_addr addr[2][DNS_MAX_ADDRS];
    /* Q_FORWARD */
    uint16_t id;                      /* the asker's */
    uint8_t *resp;                    /* a cached answer waiting for delivery */
    size_t resp_len, qwire_len;
    uint8_t qwire[];                  /* the asker's question as sent (its letter case) */
};

struct dns_resolver {
    struct ev_loop *loop;
    struct dns_upstream up;
    struct dns_cache *cache;
    size_t cache_size;
    struct dns_hosts *hosts;
    struct dns_revmap *rev;
    unsigned families;
    struct dns_query *queries;
    struct lookup *lookups[LOOKUP_BUCKETS];
    int depth, dying;                 /* dns_resolver_free from inside a callback */
    struct dns_resolver_stats st;
};

/* Frees every query (no callbacks) and stops every lookup. */
void dns_resolver_drop_all(struct dns_resolver *r);

/* resolve.c: the addresses the parsed answer |m| (|len| bytes at |buf|)
 * gives |name| (lower-case) for |type|, A or AAAA: through the answer's
 * CNAME chain to the final name, then its records (class IN only). Fills
 * |s| (done, the count, NXDOMAIN, the error) and up to DNS_MAX_ADDRS of
 * |out|.
 * spec/fuzz/dns_extract_fuzz.c calls it directly. */
void dns_resolve_extract(const uint8_t *buf, size_t len, const struct dns_msg *m, const char *name,
                         uint16_t type, struct slot *s, struct dns_addr *out);

#endif
