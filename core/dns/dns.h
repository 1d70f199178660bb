#ifndef CHUTE_DNS_DNS_H
#define CHUTE_DNS_DNS_H

/* Name resolution for the engine's own connections, off the loop thread:
 * getaddrinfo runs on a few worker threads and results come back to the
 * loop through an ev_async. The DNS part of chute (fake-IP, caching,
 * upstreams) replaces the workers with a non-blocking client later; the
 * interface stays. */

#include <ev.h>
#include <stddef.h>
#include <sys/socket.h>

#define DNS_MAX_ADDRS 16

struct dns_resolver;
struct dns_query;

/* |err| is 0, or a static message ("name not found", ...). |addrs| holds up
 * to DNS_MAX_ADDRS addresses (port 0), IPv6 and IPv4 interleaved as RFC 8305
 * asks, valid only during the call. Called on the loop thread. */
typedef void (*dns_resolve_cb)(void *arg, const char *err, const struct sockaddr_storage *addrs,
                               size_t n);

struct dns_resolver *dns_resolver_new(struct ev_loop *loop);
/* Frees the resolver; pending callbacks are never called. */
void dns_resolver_free(struct dns_resolver *r);

/* Starts resolving |name|; the callback fires once unless the query is
 * cancelled first. Returns NULL only when out of memory. */
struct dns_query *dns_resolve(struct dns_resolver *r, const char *name, dns_resolve_cb cb,
                              void *arg);
/* The callback will not be called; the query is freed when its worker ends. */
void dns_resolve_cancel(struct dns_query *q);

#endif
