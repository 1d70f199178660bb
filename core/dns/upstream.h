#ifndef CHUTE_DNS_UPSTREAM_H
#define CHUTE_DNS_UPSTREAM_H

/* Folder-private: the resolver's transport. One exchange sends one query
 * to the upstream list over UDP — a fresh non-blocking socket (random
 * source port) and a fresh random ID per attempt, next server after the
 * timeout, up to |attempts| passes — and switches to TCP with the same
 * server when an answer comes back truncated. A response counts only when
 * its ID, source address and question match the attempt's. */

#include <ev.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "dns/dns.h"
#include "dns/msg.h"

/* What exchanges run against; immutable and shared (an exchange in flight
 * keeps the one it started with across a reload). */
struct dns_upstream_conf {
    int refs;
    struct sockaddr_storage server[DNS_MAX_UPSTREAMS];
    size_t nserver;
    char interface[16];
    uint32_t fwmark;
    int (*protect)(void *arg, int fd); /* dns_resolver_opts' */
    void *protect_arg;
    double timeout;
    int attempts;
};

struct dns_upstream {
    struct ev_loop *loop;
    struct dns_upstream_conf *conf;
    uint64_t sent, timeouts, failures, truncated_tcp;
    size_t nrand;                 /* unused bytes left at the end of |rand| */
    uint8_t rand[256];            /* getrandom(2) output, consumed two bytes per ID */
    uint8_t buf[DNS_MSG_MAX];     /* receive buffer; a response is passed from here */
};

struct dns_exchange;

/* |resp| (the matching response, its ID the attempt's) or NULL with |err|
 * (dns_err_timeout, dns_err_servfail). Called from the loop, never from
 * dns_exchange_start(); the exchange is already gone and |resp| is valid
 * only during the call. */
typedef void (*dns_exchange_cb)(void *arg, const uint8_t *resp, size_t len, const char *err);

/* Builds the shared conf from |o|: its upstreams, else resolv.conf's, else
 * 127.0.0.1:53. NULL when out of memory. */
struct dns_upstream_conf *dns_upstream_conf_new(const struct dns_resolver_opts *o);
void dns_upstream_conf_unref(struct dns_upstream_conf *c);
/* Whether |a| and |b| name the same servers in the same order. */
int dns_upstream_conf_same_servers(const struct dns_upstream_conf *a,
                                   const struct dns_upstream_conf *b);
/* Makes (and closes) one socket as queries will: 0, or -errno. */
int dns_upstream_conf_probe(const struct dns_upstream_conf *c);

/* |u| is caller memory; takes its own reference on |conf|. */
void dns_upstream_init(struct dns_upstream *u, struct ev_loop *loop, struct dns_upstream_conf *conf);
void dns_upstream_fini(struct dns_upstream *u);
/* Later exchanges use |conf|; running ones keep theirs. */
void dns_upstream_set_conf(struct dns_upstream *u, struct dns_upstream_conf *conf);
/* A random 16-bit ID. */
uint16_t dns_upstream_random_id(struct dns_upstream *u);

/* Starts an exchange of |query| (|len| bytes, copied; its ID is replaced
 * per attempt). NULL when out of memory or |query| does not parse. */
struct dns_exchange *dns_exchange_start(struct dns_upstream *u, const uint8_t *query, size_t len,
                                        dns_exchange_cb cb, void *arg);
/* Stops it; the callback is not called. */
void dns_exchange_cancel(struct dns_exchange *x);

/* Nameservers of resolv.conf-style file |path| into |out| (port 53), at
 * most |max|; returns how many (0 when the file is missing). */
size_t dns_resolvconf_read(const char *path, struct sockaddr_storage *out, size_t max);

#endif
