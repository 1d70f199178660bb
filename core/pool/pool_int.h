#ifndef CHUTE_POOL_POOL_INT_H
#define CHUTE_POOL_POOL_INT_H

/* The pool's insides, shared by pool.c (idle connections, refills,
 * hand-outs) and guard.c (the retry of a warm hand-out). */

#include "pool/pool.h"

struct pool_conn {            /* an idle connection */
    struct pool *p;
    struct io_stream *s;
    double since;
    struct pool_conn *prev, *next; /* the idle list, oldest first */
};

struct pool_fill {            /* a refill on its way */
    struct pool *p;
    void *h;                  /* the connector's handle */
    struct pool_fill *prev, *next;
};

struct pool {
    struct ev_loop *loop;
    int refs;                 /* the owner's, requests' and guards' */
    int dead;                 /* pool_free was called: no refills, no retries */
    int tls;
    struct pool_opts o;
    const struct pool_connector *c;
    void *ud;
    struct pool_demand demand;
    struct pool_conn *oldest, *newest;
    unsigned nidle;
    struct pool_fill *fills;
    unsigned nfills;
    double backoff, retry_at; /* refills that failed wait before the next */
    ev_timer tick;            /* once a second while anything is held */
    struct pool_stats st;
};

void pool_ref(struct pool *p);
void pool_unref(struct pool *p);
/* Counts a fresh stream's TLS handshake as resumed or full. */
void pool_count_handshake(struct pool *p, struct io_stream *s);

/* guard.c: wraps a warm hand-out |inner|; takes a reference on |p| until
 * the first byte comes back. NULL when out of memory (|inner| untouched). */
struct io_stream *pool_guard_new(struct pool *p, struct io_stream *inner);

#endif
