#ifndef CHUTE_DNS_DNS_H
#define CHUTE_DNS_DNS_H

/* Name resolution, all on the loop thread and never blocking it:
 *  - the resolver client: queries upstream servers over UDP (retries,
 *    timeout, TCP when an answer is truncated), answers cached by TTL with
 *    negative caching, /etc/hosts first; dns_resolve() for chute's own
 *    connections and dns_forward() for queries chute relays;
 *  - the DNS server (server.c) answering clients on the TUN and on an
 *    optional listener: fake-IP or real-IP, see dns_server_*. */

#include <ev.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define DNS_MAX_ADDRS 16
#define DNS_MAX_UPSTREAMS 8

struct dns_resolver;
struct dns_query;

struct dns_resolver_opts {
    /* Upstream servers (port set; 53 usually). None: the nameservers of
     * /etc/resolv.conf, else 127.0.0.1:53. */
    struct sockaddr_storage upstream[DNS_MAX_UPSTREAMS];
    size_t nupstream;
    /* How upstream sockets avoid looping into the TUN (as outbound_env). */
    char interface[16];
    uint32_t fwmark;
    double timeout;        /* per attempt; the next upstream (or a retry) follows */
    int attempts;          /* tries over the upstream list before "timeout" */
    size_t cache_entries;  /* 0: no cache */
    const char *hosts_file;/* NULL: /etc/hosts; "" for none */
};

/* Fills |o| with the defaults: no upstreams (resolv.conf), 2 s, 2 attempts,
 * 4096 cache entries, /etc/hosts. */
void dns_resolver_opts_default(struct dns_resolver_opts *o);

/* NULL when out of memory or no socket can be made (|err| says why). */
struct dns_resolver *dns_resolver_new(struct ev_loop *loop, const struct dns_resolver_opts *o,
                                      char *err, size_t errlen);
/* Frees the resolver; pending callbacks are never called. */
void dns_resolver_free(struct dns_resolver *r);
/* New upstreams/options (a reload); queries in flight finish on the old
 * ones. The cache is kept unless the upstreams changed. */
int dns_resolver_configure(struct dns_resolver *r, const struct dns_resolver_opts *o, char *err,
                           size_t errlen);

/* |err| is 0, or a static message ("name not found", "timeout", ...).
 * |addrs| holds up to DNS_MAX_ADDRS addresses (port 0), IPv6 and IPv4
 * interleaved as RFC 8305 asks, valid only during the call. Called on the
 * loop thread, never from inside dns_resolve(). */
typedef void (*dns_resolve_cb)(void *arg, const char *err, const struct sockaddr_storage *addrs,
                               size_t n);

/* Starts resolving |name| (A and AAAA; an IP literal resolves to itself);
 * the callback fires once unless the query is cancelled first. Returns
 * NULL only when out of memory. */
struct dns_query *dns_resolve(struct dns_resolver *r, const char *name, dns_resolve_cb cb,
                              void *arg);

/* |resp| is the upstream's response (or the cache's) with the ID of the
 * query that was forwarded, or NULL with |err| set ("timeout",
 * "servfail"...). Valid only during the call. */
typedef void (*dns_forward_cb)(void *arg, const uint8_t *resp, size_t len, const char *err);

/* Relays the query message |q| (any type) through the cache and the
 * upstreams. Returns NULL only when out of memory or |q| does not parse. */
struct dns_query *dns_forward(struct dns_resolver *r, const uint8_t *q, size_t len,
                              dns_forward_cb cb, void *arg);

/* The callback will not be called; the query is freed. Works for both. */
void dns_query_cancel(struct dns_query *q);
#define dns_resolve_cancel dns_query_cancel

/* The name an A/AAAA answer gave for |ip| (4 or 16 bytes), remembered from
 * every answer the resolver received (bounded, LRU); NULL if none. */
const char *dns_resolver_name_of(struct dns_resolver *r, const uint8_t *ip, int version);

struct dns_resolver_stats {
    uint64_t queries;      /* dns_resolve + dns_forward calls */
    uint64_t sent;         /* datagrams/segments sent upstream */
    uint64_t timeouts, failures, truncated_tcp;
    uint64_t cache_hits, cache_misses;
    uint64_t hosts_hits;
    size_t cache_entries, reverse_entries;
};
void dns_resolver_stats(const struct dns_resolver *r, struct dns_resolver_stats *out);

#endif
