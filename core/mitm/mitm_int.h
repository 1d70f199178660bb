#ifndef CHUTE_MITM_MITM_INT_H
#define CHUTE_MITM_MITM_INT_H

/* Internal to mitm/: the engine's handle (mitm.c), one intercepted flow
 * (session.c: handshakes, pass-through) and its exchanges (exchange.c:
 * hooks, upstreams for later requests). */

#include <ev.h>

#include "flow/flow.h"
#include "flow/relay.h"
#include "flow/session.h"
#include "http/h1_conn.h"
#include "mitm/mitm.h"

#define MITM_BYPASS_MAX 256

/* What the MITM remembers of a host: passed through uninspected until
 * |until| (auto_bypass), or |silent| clients in a row that closed right
 * after the handshake without a request. */
struct mitm_bypass {
    char host[FLOW_NAME_MAX + 1];
    double until;
    unsigned silent;
    double seen;
};

/* Silent closes in a row that count as a client refusing the leaf: one is
 * what a browser's unused preconnect looks like too. */
#define MITM_SILENT_REFUSALS 3

/* Origins a handshake found speaking only HTTP/1.1 (probe.c): flows to
 * them do not wait for another's handshake. */
#define MITM_H1_KNOWN 64
#define MITM_H1_KNOWN_SECS 300.0
struct mitm_h1_known {
    char host[FLOW_NAME_MAX + 1];
    uint16_t port;
    double until;
};

/* HTTP/2 body bytes held by every session together (h2_mem.c). */
struct mitm_h2_mem {
    size_t held, peak;          /* body bytes waiting in buffers, now and at most */
    size_t alloc;               /* bytes the buffers take (empty ones are freed past max/2) */
    size_t max;                 /* mitm_opts.h2_max_buffered */
    size_t streams;             /* exchanges alive */
    int32_t window;             /* the stream window sessions announce (0: the full one) */
    uint64_t narrowed;          /* times it was narrowed */
    struct h2_io *ios;          /* every session, both roles */
};

struct mitm {
    const struct flow_env *env;
    struct mitm_opts o;
    struct flow_intercept icpt;
    struct mitm_stats st;
    struct mitm_bypass bypass[MITM_BYPASS_MAX];
    size_t bypass_next; /* the slot the next entry takes when none has expired */
    struct h2_pool *h2pool; /* HTTP/2: shared upstream connections (h2_upstream.c) */
    struct mitm_h2_mem h2mem;
    struct mitm_h1_pool *h1pool; /* HTTP/1: idle upstream connections (h1_pool.c) */
    struct mitm_sess *probes, *waiters; /* probe.c */
    struct mitm_h1_known h1known[MITM_H1_KNOWN];
    size_t h1known_next;
};

/* The states of one intercepted flow:
 *   M_HANDSHAKE  the upstream's TLS handshake, then the client's
 *   M_HTTP       the exchange driver owns both sides
 *   M_REOPEN     a later request waits for a new upstream (open + TLS)
 *   M_PASS_OPEN  the origin speaks only TLS 1.3: a fresh upstream opens
 *   M_PASS       ... and the plain relay carries the flow */
enum mitm_state { M_HANDSHAKE, M_HTTP, M_REOPEN, M_PASS_OPEN, M_PASS };

enum mitm_probe { MITM_PROBE_NONE, MITM_PROBE_PROBING, MITM_PROBE_WAITING };

struct mitm_sess {
    struct mitm *m;
    struct flow_relay *r; /* the flow owner's: told at the end */
    struct flow *f;
    enum mitm_state state;
    char host[FLOW_NAME_MAX + 1];
    uint16_t port;
    struct io_stream *client;  /* raw, until the TLS server takes it */
    struct io_stream *up;      /* the origin's TLS stream, until a request takes it */
    struct tls_handshake *hs;  /* in progress, either side */
    struct http_h1_conn *h;
    struct flow_open *oc;
    ev_timer timer;            /* the handshakes' deadline */
    char *reply;               /* the inbound's answer (SOCKS5, CONNECT), sent first */
    size_t reply_len, reply_off;
    int tls_waits;             /* the client's handshake waits for |reply| to go out */
    const char *fail;          /* the origin failed: every request gets a 502 saying so */
    char failbuf[160];
    struct flow_relay pass;
    struct mitm_request mreq;  /* the request in flight, as the hooks saw it */
    /* Where the kept upstream goes: the flow's origin, or another a URL
     * rewrite sent a request to (|alt| is the flow as opened for it). */
    char up_host[FLOW_NAME_MAX + 1];
    uint16_t up_port;
    int up_plain;
    struct flow alt;
    struct mem_slice req_host; /* the request's authority before the hooks ran */
    uint16_t req_port;
    int hooked_resp;           /* a hook wants its response */
    unsigned requests;
    /* HTTP/2 (h2_server.c): the origin speaks h2 (its connection went to
     * the shared pool), and the client's h2 session when it chose h2. */
    int up_h2;
    struct h2_srv *h2;
    /* probe.c: this flow's handshake tells others of its origin, or it
     * waits for another's, holding its own connection (|raw_up|). */
    enum mitm_probe probe_state;
    struct mitm_sess *probe_next;
    struct io_stream *raw_up;
};

/* mitm.c */
const char *mitm_flow_host(const struct flow *f, char *buf, size_t len);
/* |out| as |f| (but for what |f| owns), going to |host|:|port|: the
 * flow's own origin opens as the flow did (its address, or its fake IP's
 * name), another (a rewrite's) by name. 0, or -1 for an unusable name. */
int mitm_flow_to(struct flow *out, const struct flow *f, const char *host, uint16_t port);
void mitm_bypass_add(struct mitm *m, const char *host);
/* A client of |host| closed right after the handshake without a request:
 * 1 when that makes MITM_SILENT_REFUSALS in a row (a refusal). */
int mitm_host_silent(struct mitm *m, const char *host);
/* A request of |host| was served: the silent count starts again. */
void mitm_host_served(struct mitm *m, const char *host);

/* session.c */
void *mitm_sess_start(void *ud, struct flow_relay *r, const struct flow_relay_args *a,
                      struct flow *f);
void mitm_sess_stop(void *state, int reset);
/* Ends the flow: everything still held is closed, the owner told. */
void mitm_sess_end(struct mitm_sess *s, const char *reason);
/* Starts a TLS client handshake to the origin over |inner|. */
struct tls_handshake *mitm_sess_upstream_tls(struct mitm_sess *s, struct io_stream *inner,
                                             const char *host, uint16_t port,
                                             void (*cb)(void *, struct io_stream *, int,
                                                        const char *));

/* The same, for any ALPN list (h2_upstream.c offers h2). */
struct tls_handshake *mitm_upstream_tls(struct mitm *m, struct io_stream *inner, const char *host,
                                        uint16_t port, const char *const *alpn, size_t nalpn,
                                        void (*cb)(void *, struct io_stream *, int, const char *),
                                        void *arg);

/* h1_pool.c: idle HTTP/1 origin connections, keyed by (host, port,
 * |plain|, |f|'s policy). park takes |s| (closing it when it cannot keep
 * it); take gives the newest of its key, or NULL. */
void mitm_h1_park(struct mitm *m, const struct flow *f, const char *host, uint16_t port, int plain,
                  struct io_stream *s);
struct io_stream *mitm_h1_take(struct mitm *m, const struct flow *f, const char *host,
                               uint16_t port, int plain);
/* 1 when an idle connection of that key waits (nothing is taken). */
int mitm_h1_has(const struct mitm *m, const struct flow *f, const char *host, uint16_t port,
                int plain);
size_t mitm_h1_idle_count(const struct mitm *m);
void mitm_h1_pool_free(struct mitm *m);

/* probe.c: 1 when another flow's handshake to the same origin runs: |s|
 * waits for it (holding |raw|) and mitm_sess_probed follows; else 0 and
 * |s| is the one that probes (unless the origin is known to be h1).
 * probe_done wakes the waiters once the outcome is known; forget drops
 * |s| from either list (it is being freed). */
int mitm_probe_wait(struct mitm_sess *s, struct io_stream *raw);
void mitm_probe_done(struct mitm_sess *s, int h1);
void mitm_probe_forget(struct mitm_sess *s);
/* 1 while |host|:|port| is known to speak only HTTP/1.1 (for
 * MITM_H1_KNOWN_SECS after a handshake said so); add remembers it. */
int mitm_h1_known(struct mitm *m, const char *host, uint16_t port);
void mitm_h1_known_add(struct mitm *m, const char *host, uint16_t port);
/* session.c: a waiter's turn, with its own connection to the origin. */
void mitm_sess_probed(struct mitm_sess *s, struct io_stream *raw);

/* exchange.c */
extern const struct http_h1_conn_cbs mitm_exchange_cbs;
/* "https://host[:port]path": what URL patterns see, in |a|. */
struct mem_slice mitm_request_url(struct mitm_sess *s, struct mem_arena *a,
                                  const struct http_fwd_req *req);

#endif
