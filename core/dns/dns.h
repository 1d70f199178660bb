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

#include "log/counter.h"

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
    /* When set, called with each upstream socket instead of the two above
     * (the embedding host's protect_socket): 0 or an errno value. */
    int (*protect)(void *arg, int fd);
    void *protect_arg;
    double timeout;        /* per attempt; the next upstream (or a retry) follows */
    int attempts;          /* tries over the upstream list before "timeout" */
    size_t cache_entries;  /* 0: no cache */
    const char *hosts_file;/* NULL: /etc/hosts; "" for none */
    /* Address families dns_resolve() asks for: 0 follows the machine's
     * addresses (those of |interface| when set) as AI_ADDRCONFIG does —
     * AAAA only with a global IPv6 address, A only with a non-loopback
     * IPv4 one, both when neither is found; else DNS_FAMILY_* bits. */
    unsigned families;
};

#define DNS_FAMILY_V4 1u
#define DNS_FAMILY_V6 2u

/* The errors callbacks get, comparable by address. */
extern const char dns_err_not_found[]; /* "name not found": NXDOMAIN, or no address */
extern const char dns_err_timeout[];   /* "timeout": no upstream answered */
extern const char dns_err_servfail[];  /* "server failure": SERVFAIL/REFUSED, bad answers */
extern const char dns_err_nomem[];     /* "out of memory" */

/* Fills |o| with the defaults: no upstreams (resolv.conf), 2 s, 2 attempts,
 * 4096 cache entries, /etc/hosts. */
void dns_resolver_opts_default(struct dns_resolver_opts *o);

/* NULL when out of memory or no socket can be made (|err| says why). */
struct dns_resolver *dns_resolver_new(struct ev_loop *loop, const struct dns_resolver_opts *o,
                                      char *err, size_t errlen);
/* Frees the resolver; pending callbacks are never called. May be called
 * from inside one of its callbacks. */
void dns_resolver_free(struct dns_resolver *r);
/* New upstreams/options (a reload); queries in flight finish on the old
 * ones. The cache is kept unless the upstreams changed. */
int dns_resolver_configure(struct dns_resolver *r, const struct dns_resolver_opts *o, char *err,
                           size_t errlen);

/* |err| is 0, or one of dns_err_* (compare by address).
 * |addrs| holds up to DNS_MAX_ADDRS addresses (port 0), IPv6 and IPv4
 * interleaved as RFC 8305 asks, valid only during the call. Called on the
 * loop thread, never from inside dns_resolve(). */
typedef void (*dns_resolve_cb)(void *arg, const char *err, const struct sockaddr_storage *addrs,
                               size_t n);

/* Starts resolving |name| (A and AAAA; an IP literal resolves to itself):
 * the hosts file, then the cache, then the upstreams. Concurrent lookups
 * of one name share their upstream queries. With the addresses of one
 * family in, the other gets 50 ms more (RFC 8305 Resolution Delay). The
 * callback fires once unless the query is cancelled first; after it, the
 * query is gone. Returns NULL only when out of memory. */
struct dns_query *dns_resolve(struct dns_resolver *r, const char *name, dns_resolve_cb cb,
                              void *arg);

/* |resp| is the upstream's response (or the cache's) with the ID and the
 * question (letter case included) of the query that was forwarded, or NULL
 * with |err| set (dns_err_timeout, dns_err_servfail: every upstream said
 * SERVFAIL/REFUSED or could not be reached). Valid only during the call;
 * never called from inside dns_forward(). */
typedef void (*dns_forward_cb)(void *arg, const uint8_t *resp, size_t len, const char *err);

/* Relays the query message |q| (any type) through the cache and the
 * upstreams. A plain IN query is asked anew (EDNS0, 1232 bytes) and shares
 * lookups and the cache with dns_resolve(); anything else (other class or
 * opcode, several questions) is sent as is and not cached. Returns NULL
 * only when out of memory or |q| does not parse. */
struct dns_query *dns_forward(struct dns_resolver *r, const uint8_t *q, size_t len,
                              dns_forward_cb cb, void *arg);

/* The callback will not be called; the query is freed. Works for both. */
void dns_query_cancel(struct dns_query *q);
#define dns_resolve_cancel dns_query_cancel

/* The name an A/AAAA answer gave for |ip| (4 or 16 bytes), remembered from
 * every answer the resolver received (bounded, LRU); NULL if none. */
const char *dns_resolver_name_of(struct dns_resolver *r, const uint8_t *ip, int version);

/* The resolver's counters, one X(field, key) each (log/counter.h). */
#define DNS_RESOLVER_STATS(X)                                                                      \
    X(queries, queries)                 /* dns_resolve + dns_forward calls */                      \
    X(sent, sent)                       /* datagrams/segments sent upstream */                     \
    X(cache_hits, cache_hits)           /* per (name, type) looked up */                           \
    X(cache_misses, cache_misses)                                                                  \
    X(timeouts, timeouts)               /* attempts an upstream left unanswered */                 \
    X(truncated_tcp, tcp)               /* truncated UDP answers retried over TCP */               \
    X(failures, failures)               /* upstream exchanges that ended in an error */            \
    X(abandoned, abandoned)             /* exchanges stopped: every query for them was cancelled */ \
    X(hosts_hits, hosts_hits)           /* dns_resolve answered by the hosts file */               \
    X(cache_entries, cache_entries)                                                                \
    X(reverse_entries, reverse_entries) /* IP -> name pairs, from answers */

struct dns_resolver_stats {
#define X(field, key) uint64_t field;
    DNS_RESOLVER_STATS(X)
#undef X
};
/* DNS_RESOLVER_STATS as a table over struct dns_resolver_stats. */
extern const struct log_counter dns_resolver_counters[];
void dns_resolver_stats(const struct dns_resolver *r, struct dns_resolver_stats *out);

/* ---- The DNS server (server.c) ---- */

enum dns_mode { DNS_MODE_FAKE_IP = 0, DNS_MODE_REAL_IP };

struct dns_server_opts {
    enum dns_mode mode;
    char range4[64], range6[64];  /* fake-IP ranges ("" : none for v6) */
    uint32_t fake_ttl;            /* seconds on fake answers */
    size_t fake_max;              /* live mappings at most (0: the range's size) */
    const char *state_file;       /* fake-IP mappings across restarts (NULL: none) */
    /* Names that get real answers in fake-ip mode: "name" exact, "+.name",
     * "*.name" or ".name" for the name and its subdomains. */
    const char *const *exclude;
    size_t nexclude;
    /* UDP+TCP listener ("127.0.0.1:5353"); NULL: none. The TUN's port 53 is
     * answered without it. */
    const struct sockaddr_storage *listen;
    /* Forwarded queries waiting for the upstreams at once; past it the
     * oldest is answered SERVFAIL (0: DNS_SERVER_PENDING_DEFAULT). Each
     * waiting name costs an upstream socket while its upstream is slow. */
    size_t max_pending;
};
#define DNS_SERVER_PENDING_DEFAULT 256

/* What chute.on_dns decided for a name: nothing (answer as usual), block
 * (NXDOMAIN), fixed addresses, or real (no fake IP for it). */
enum dns_hook_action { DNS_HOOK_NONE = 0, DNS_HOOK_BLOCK, DNS_HOOK_ADDRS, DNS_HOOK_REAL };
#define DNS_HOOK_MAX_ADDRS 8
struct dns_hook_result {
    enum dns_hook_action action;
    size_t n4, n6;
    uint8_t v4[DNS_HOOK_MAX_ADDRS][4];
    uint8_t v6[DNS_HOOK_MAX_ADDRS][16];
};
/* Called at most once per name (the result is cached until the hook is
 * set again). */
typedef void (*dns_hook_fn)(void *arg, const char *name, uint16_t qtype,
                            struct dns_hook_result *out);

struct dns_server;

/* NULL with |err| (a bad range or exclude, a listener that cannot bind, an
 * unreadable state file). Loads the state file. */
struct dns_server *dns_server_new(struct ev_loop *loop, struct dns_resolver *r,
                                  const struct dns_server_opts *o, char *err, size_t errlen);
/* Saves the fake-IP state (if a file is set) and frees. */
void dns_server_free(struct dns_server *s);
void dns_server_set_hook(struct dns_server *s, dns_hook_fn fn, void *arg);

/* |msg| answers the query; |ctx| is the copy given to dns_server_query. */
typedef void (*dns_answer_cb)(const void *ctx, const uint8_t *msg, size_t len);
#define DNS_CTX_MAX 64
/* Answers the query message |q|: at once (fake-IP, hook, cache) or when the
 * upstream does. |max| is the largest reply the transport takes (TCP:
 * 65535); with |udp| the requester's EDNS0 size (512 without it, 4096 at
 * most) bounds it too, and a larger answer is truncated (TC). A message that cannot be
 * answered (no header) gets no callback. */
void dns_server_query(struct dns_server *s, const uint8_t *q, size_t len, size_t max, int udp,
                      dns_answer_cb cb, const void *ctx, size_t ctx_len);

/* Fake-IP: 1 if |ip| is in a fake range; the name it stands for (or NULL:
 * not mapped, e.g. recycled or from before a restart without state). */
int dns_server_is_fake(const struct dns_server *s, const uint8_t *ip, int version);
const char *dns_server_fake_name(struct dns_server *s, const uint8_t *ip, int version);
/* Keeps |ip| (a TUN address) out of the fake-IP pool. */
void dns_server_reserve(struct dns_server *s, const uint8_t *ip, int version);
/* The TCP address the TUN's TCP/53 flows are sent to. */
const struct sockaddr_storage *dns_server_tcp_addr(const struct dns_server *s);

/* The server's counters, one X(field, key) each (log/counter.h). */
#define DNS_SERVER_STATS(X)                                                                        \
    X(queries, queries)                                                                            \
    X(fake_answers, fake)         /* answered in fake-IP mode (A/AAAA, empty HTTPS) */             \
    X(forwarded, forwarded)       /* sent to the resolver */                                       \
    X(hook_answers, hook)         /* answered with chute.on_dns's addresses */                     \
    X(blocked, blocked)           /* NXDOMAIN from chute.on_dns */                                 \
    X(formerr, formerr)                                                                            \
    X(servfail, servfail)         /* forwarded, and the resolver gave no answer */                 \
    X(dropped, dropped)           /* not answered: no header, out of memory */                     \
    X(pending, pending)           /* forwarded queries waiting for the upstreams now */            \
    X(pending_dropped, pending_dropped) /* answered SERVFAIL early: max_pending were waiting */     \
    X(fake_misses, fake_misses)   /* flows to a fake IP with no name behind it */                  \
    X(fake_entries, fake_entries) /* fake-IP mappings held */                                      \
    X(fake_bytes, fake_bytes)     /* memory they take */

struct dns_server_stats {
#define X(field, key) uint64_t field;
    DNS_SERVER_STATS(X)
#undef X
};
/* DNS_SERVER_STATS as a table over struct dns_server_stats. */
extern const struct log_counter dns_server_counters[];
void dns_server_stats(const struct dns_server *s, struct dns_server_stats *out);
void dns_server_count_fake_miss(struct dns_server *s);

#endif
