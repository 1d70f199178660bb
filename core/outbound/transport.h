#ifndef CHUTE_OUTBOUND_TRANSPORT_H
#define CHUTE_OUTBOUND_TRANSPORT_H

/* The first half of opening a proxy connection: the transport to the
 * proxy's server (TCP, or TCP+TLS), before any byte of the protocol for a
 * destination: a warm one from the proxy's pool (core/pool) when it has
 * one, else a fresh one. Private to core/outbound. */

#include "io/io.h"
#include "outbound/outbound.h"
#include "outbound/proxy.h"

struct outbound_transport;
struct pool;

/* |s| is the connected transport (the callee owns it), or NULL with |err|
 * an errno value and |why| a static text ("proxy server refused the
 * connection", "tls: certificate not trusted", ...). */
typedef void (*outbound_transport_cb)(void *arg, struct io_stream *s, int err, const char *why);

/* Connects to |p|'s server, with TLS (offering |alpn|) when |tls|, or
 * takes a connection from |pool| (NULL: none), which opens fresh ones the
 * same way. The callback fires exactly once, never from inside this call,
 * unless cancelled. NULL when out of memory. */
struct outbound_transport *outbound_transport_open(const struct outbound_env *env,
                                                   const struct outbound_proxy *p,
                                                   struct pool *pool, int tls,
                                                   const char *const *alpn, size_t nalpn,
                                                   double timeout, outbound_transport_cb cb,
                                                   void *arg);
void outbound_transport_cancel(struct outbound_transport *t);
/* What a timeout means at the stage |t| is at (static text). */
const char *outbound_transport_timeout_why(const struct outbound_transport *t);

/* open.c: how |p|'s protocol runs over its transport: TLS or not, and the
 * ALPN names to offer. */
void outbound_transport_kind(const struct outbound_proxy *p, int *tls, const char *const **alpn,
                             size_t *nalpn);

#endif
