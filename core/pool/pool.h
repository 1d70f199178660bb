#ifndef CHUTE_POOL_POOL_H
#define CHUTE_POOL_POOL_H

/* Warm connections to one proxy server: already connected and, for
 * TLS-based proxies, already handshaken (a resumed session when the cache
 * has one), handed to a new flow at once and refilled in the background.
 *
 * Each proxied connection carries one destination and is used once
 * (Trojan, Shadowsocks, SOCKS5 and HTTP CONNECT all name the target per
 * connection), so a pool pre-pays the handshakes only; a connection handed
 * out never comes back. The protocol's own header goes out with the flow's
 * first bytes, over the handed-out stream (core/outbound). What is
 * pre-paid, per protocol (the connector's business, set_pool.c): Trojan
 * and https proxies TCP + TLS; SOCKS5 TCP + the greeting and the RFC 1929
 * auth (a hand-out sends only the CONNECT request); Shadowsocks and plain
 * HTTP CONNECT only TCP (CONNECT has nothing to send ahead of the
 * request).
 *
 * The pool knows nothing of proxies: it gets a connector (how to open one
 * connection to its server) from its owner, core/outbound, which sits above
 * it (spec/layering/layers.txt).
 *
 * Size: the most new connections asked for in any one second of the last
 * minute, at most max_idle; no demand for a minute, no warm connections
 * (demand.c). Idle connections live idle_timeout seconds at most.
 *
 * Dead idle connections (the server closed, reset or sent a TLS alert: the
 * stream turns readable while idle) are discarded when noticed, and a
 * connection is checked once more at hand-out (a peek at its socket), so a
 * dead one is never handed out. A warm hand-out whose stream still fails
 * before the first byte comes back (a write error, or an end or reset
 * before any answer) is retried once on a fresh connection: the bytes the
 * flow wrote so far (up to POOL_REPLAY_MAX) are written again there, and
 * the flow sees nothing of it (guard.c).
 *
 * Every close of a pooled connection is a clean one (close_notify for TLS)
 * so the server keeps the session for the next resumption.
 *
 * Loop thread only. */

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "io/io.h"
#include "log/counter.h"

#define POOL_MAX_IDLE 8          /* pool = { max_idle = 8 } */
#define POOL_IDLE_TIMEOUT 30.0   /* pool = { idle_timeout = 30 } */
#define POOL_MAX_IDLE_LIMIT 64   /* what the bundle may ask for at most */
#define POOL_REPLAY_MAX 16384    /* bytes kept for a retry of a warm hand-out */

struct pool_opts {
    int enabled;          /* 0: no pool (pool = false; plain proxies by default) */
    unsigned max_idle;    /* 1..POOL_MAX_IDLE_LIMIT */
    double idle_timeout;  /* seconds, > 0 */
};

/* |s| is a connected stream to the server (the callee owns it), or NULL
 * with |err| an errno value and |why| a static text. */
typedef void (*pool_conn_cb)(void *arg, struct io_stream *s, int err, const char *why);

/* How the owner opens one connection to the server (TCP, or TCP+TLS). */
struct pool_connector {
    /* Starts; |cb| fires exactly once, never from inside this call, unless
     * cancelled. Returns a handle for cancel, or NULL when out of memory. */
    void *(*open)(void *ud, pool_conn_cb cb, void *arg);
    void (*cancel)(void *handle);
};

/* The counters of one pool, one X(field, key) each (log/counter.h). */
#define POOL_STATS(X)                                                                              \
    X(warm, warm)               /* flows handed an idle, ready connection */                       \
    X(cold, cold)               /* flows that waited for a connection of their own */              \
    X(resumed, resumed)         /* TLS handshakes that resumed a session */                        \
    X(full, full_handshakes)    /* TLS handshakes that did not */                                  \
    X(dead, discarded_dead)     /* idle connections the server closed, reset or alerted */         \
    X(retried, retried)         /* warm hand-outs that failed and went again on a fresh one */     \
    X(expired, expired)         /* idle connections closed after idle_timeout or for size */       \
    X(refills, refills)         /* connections opened in the background */                        \
    X(idle, idle)               /* idle connections held now */

struct pool_stats {
#define X(field, key) uint64_t field;
    POOL_STATS(X)
#undef X
};
/* POOL_STATS as a table over struct pool_stats. */
extern const struct log_counter pool_counters[];

struct pool;

/* A pool for one server. |tls|: the connector's streams are TLS streams
 * (their handshakes are counted resumed or full). |c| and the owner's |ud|
 * must outlive the pool (or be replaced by pool_rebind); |o| is copied.
 * NULL when out of memory. Holds nothing until the first acquire. */
struct pool *pool_new(struct ev_loop *loop, const struct pool_opts *o, int tls,
                      const struct pool_connector *c, void *ud);
/* The owner's |ud| changed (a reload kept the pool): refills and retries
 * open through the new one from now on; those already running finish with
 * the old one, which the owner keeps alive until they do. */
void pool_rebind(struct pool *p, void *ud);
/* Closes every idle connection, cancels the refills and forgets the
 * demand (a group marked the server down). Flows ask again to refill. */
void pool_drain(struct pool *p);
/* Drains and frees. Streams already handed out live on; their retry, if it
 * has not happened yet, will not. */
void pool_free(struct pool *p);

void pool_stats(const struct pool *p, struct pool_stats *out);

struct pool_req;

/* A connection for a new flow: a warm one (delivered from the loop's next
 * iteration) or, when none is idle, a fresh one of the flow's own. Counts
 * the demand and starts refills. |cb| fires exactly once, never from
 * inside this call, unless cancelled; the stream is the callee's. NULL when
 * out of memory. */
struct pool_req *pool_acquire(struct pool *p, pool_conn_cb cb, void *arg);
void pool_acquire_cancel(struct pool_req *r);

/* The stream a hand-out's owner should keep once its retry is over (the
 * proxy answered a byte): the connection under the pool's wrapper, which
 * is freed, so a bare socket can be spliced by the relays. |s| itself
 * when it is no wrapper or a retry may still come. Call with no callbacks
 * set and not reading (a handshake that just ended). */
struct io_stream *pool_stream_settle(struct io_stream *s);

/* ---- demand.c: the size from the demand of the last minute ---------------- */

#define POOL_DEMAND_SECONDS 60

struct pool_demand {
    uint32_t count[POOL_DEMAND_SECONDS]; /* acquires in each second, a ring */
    int64_t sec[POOL_DEMAND_SECONDS];    /* which second each slot holds */
};

void pool_demand_init(struct pool_demand *d);
/* One more acquire at time |now| (seconds). */
void pool_demand_note(struct pool_demand *d, double now);
/* The idle connections to keep at |now|: the busiest second of the last
 * minute, at most |max|; 0 when the minute had no demand. */
unsigned pool_demand_target(const struct pool_demand *d, double now, unsigned max);

#endif
