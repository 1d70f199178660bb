#ifndef CHUTE_MITM_MITM_H
#define CHUTE_MITM_MITM_H

/* The HTTPS MITM: for a flow whose host is on the MITM list, chute opens
 * and handshakes the upstream first (through the flow's policy), so it
 * knows the origin's ALPN and has checked its certificate, then answers
 * the client's ClientHello with a leaf minted for the host, and relays
 * HTTP/1.1 exchange by exchange (http/h1_conn.h) through the hooks.
 *
 * It takes flows at flow/'s intercept seam (flow.h struct flow_intercept),
 * so the TUN, the SOCKS5 and the HTTP inbound all reach it the same way;
 * everything is over io streams (sans-I/O below them).
 *
 * Hooks are injected (the script's Lua hooks, the declarative rewrites of
 * Surge modules): mitm/ never reaches up. Loop thread only. */

#include <stddef.h>
#include <stdint.h>

#include "http/h1_forward.h"
#include "log/counter.h"
#include "mem/arena.h"
#include "mem/slice.h"

struct flow;
struct flow_env;
struct flow_intercept;
struct mitm;
struct mitm_hosts;
struct tls_ctx;
struct tls_mint;

/* ---- hooks ---------------------------------------------------------------- */

/* One decrypted request as the hooks see it. Strings a hook sets must live
 * in |arena| (the request's). */
struct mitm_request {
    struct http_fwd_req *req; /* editable: method, path (with its query), fields */
    struct mem_arena *arena;
    const char *scheme;       /* "https" */
    struct mem_slice host;    /* the origin as the flow names it (not Host) */
    uint16_t port;
    /* "scheme://host[:port]path?query" as the request arrived, in the arena;
     * what URL patterns are matched against. A hook that changes the
     * method, path or host does not change it. */
    struct mem_slice url;
    const struct flow *flow;
    /* The body, when a hook asked for it (body = true) and it fit its
     * max_body; else absent (body_set 0). A hook may replace it. */
    const char *body;
    size_t body_len;
    int body_set;
};

/* A local answer instead of the upstream's (chute.respond, a redirect, a
 * reject, a Map Local line). |extra| holds whole header lines with their
 * CRLF ("Location: ...\r\n"), or is NULL; |body| is sent with its length.
 * Everything lives in the request's arena. reject: close the client
 * connection without an answer. */
struct mitm_reply {
    int status;
    const char *extra;
    struct mem_slice body;
    int reject;
};

/* A set of hooks: the script's, or a module's rewrites. Each is called
 * only for requests its own URL filter wants (matched in C: a request no
 * hook wants never enters Lua). Never fails outward: a hook's error is
 * logged (with file:line) and the message passes unmodified. */
struct mitm_hooks {
    /* 1 when some hook of this set wants requests to |url| (method too:
     * rewrites may name it). Cheap: C only. */
    int (*wants_request)(void *ud, const struct mitm_request *m);
    /* Bytes of request body the set wants to see before on_request
     * (0: none; the body streams). NULL: never. */
    size_t (*request_body)(void *ud, const struct mitm_request *m);
    /* Runs the set's request hooks on |m|: 0 to forward it (edited or
     * not), 1 with |out| filled to answer locally. */
    int (*on_request)(void *ud, struct mitm_request *m, struct mitm_reply *out);
    /* 1 when some hook of this set wants the response to |m|. */
    int (*wants_response)(void *ud, const struct mitm_request *m);
    /* Bytes of response body wanted before on_response (0: none). */
    size_t (*response_body)(void *ud, const struct mitm_request *m,
                            const struct http_fwd_resp *resp);
    /* Runs the response hooks: |resp->fields| are editable; |body| and
     * |*body_len| (NULL when not asked for) may be replaced with arena
     * memory. */
    void (*on_response)(void *ud, struct mitm_request *m, struct http_fwd_resp *resp,
                        const char **body, size_t *body_len);
    void *ud;
};

/* ---- hosts (Surge's [MITM] hostname syntax) ------------------------------ */

/* "*.example.com", "api.example.net:8443", "-pinned.example.com": '*' any
 * run of characters, '?' one, a leading '-' excludes, first match wins,
 * port 443 unless given (":0" or "*:port"... as Surge's manual says). */
struct mitm_hosts *mitm_hosts_new(void);
void mitm_hosts_free(struct mitm_hosts *h);
/* 0, or -1 with |err| naming the problem (empty, bad port, a space). */
int mitm_hosts_add(struct mitm_hosts *h, const char *pattern, size_t len, char *err,
                   size_t errlen);
/* 1 when |host|:|port| is to be intercepted (the first pattern that
 * matches includes it), 0 otherwise. Names compare case-insensitively. */
int mitm_hosts_match(const struct mitm_hosts *h, const char *host, size_t len, uint16_t port);
size_t mitm_hosts_count(const struct mitm_hosts *h);
/* 1 when some pattern that includes hosts is for |port| (or any port):
 * a flow to that port needs its name before the list can decide. */
int mitm_hosts_port_used(const struct mitm_hosts *h, uint16_t port);

/* ---- the engine's handle ------------------------------------------------- */

struct mitm_opts {
    struct mitm_hosts *hosts;       /* what is intercepted (owned by the caller) */
    struct mitm_hosts *skip_verify; /* origins whose certificate is not checked, or NULL */
    struct tls_mint *mint;          /* leaves (owned by the caller) */
    struct tls_ctx *trust;          /* upstream verification (owned by the caller) */
    const struct mitm_hooks *const *hooks; /* run in order: rewrites, then the script's */
    size_t nhooks;
    int auto_bypass;                /* pass a host through a while after a client refused
                                     * our leaf */
    double bypass_seconds;
    int block_quic;                 /* refuse UDP/443 to MITM hosts (the TUN) */
    double idle_timeout;            /* seconds with nothing moving on an exchange */
    size_t h2_max_buffered;         /* h2 body bytes all sessions may hold: stream windows
                                     * narrow to fit it (0: MITM_H2_MAX_BUFFERED) */
};

#define MITM_H2_MAX_BUFFERED ((size_t)64 << 20)

/* The MITM's counters, one X(field, key) each (log/counter.h). */
#define MITM_STATS(X)                                                                              \
    X(flows, mitm_flows)                 /* flows taken */                                         \
    X(active, mitm_active)               /* of which live now */                                   \
    X(requests, mitm_requests)           /* requests read from clients */                          \
    X(answered, mitm_answered)           /* answered by a hook (respond, redirect, map local) */   \
    X(rejected, mitm_rejected)           /* closed by a hook's reject */                           \
    X(alpn_h1, mitm_alpn_http1)          /* client handshakes that chose http/1.1 */               \
    X(alpn_none, mitm_alpn_none)         /* ... that offered no ALPN */                            \
    X(verify_failed, mitm_upstream_verify_failed) /* origins whose certificate failed: 502 */      \
    X(upstream_failed, mitm_upstream_failed)      /* other upstream handshake failures: 502 */     \
    X(tls13_passed, mitm_tls13_passthrough)       /* origins speaking only TLS 1.3: passed */      \
    X(client_refused, mitm_client_refused)        /* clients that refused the leaf */              \
    X(client_tls_failed, mitm_client_tls_failed)  /* other client handshake failures */            \
    X(bypassed, mitm_bypassed)           /* flows passed uninspected by auto_bypass */             \
    X(quic_blocked, mitm_quic_blocked)   /* UDP/443 refused for a MITM host */                \
    /* HTTP/1 origin connections between requests (mitm/h1_pool.c) */                             \
    X(h1_up_idle, mitm_h1_upstream_idle)     /* waiting in the pool now */                      \
    X(h1_up_parked, mitm_h1_upstream_parked) /* given back to the pool after a response */      \
    X(h1_up_reused, mitm_h1_upstream_reused) /* requests sent on a pooled connection */         \
    X(h1_up_purged, mitm_h1_upstream_purged) /* closed unused (idle 4 s, or the pool full) */   \
    X(h1_up_closed, mitm_h1_upstream_closed) /* closed by the origin while pooled */            \
    /* HTTP/2 (mitm/h2_*.c) */                                                                     \
    X(h2_clients, mitm_h2_client_conns)  /* client connections that chose h2 */                 \
    X(h2_streams, mitm_h2_streams)       /* client streams (requests) */                        \
    X(h2_client_rst, mitm_h2_client_rst) /* streams the client reset */                         \
    X(h2_up_opened, mitm_h2_upstream_opened) /* upstream h2 connections opened */               \
    X(h2_up_reused, mitm_h2_upstream_reused) /* streams sent on a connection already open */    \
    X(h2_up_streams, mitm_h2_upstream_streams) /* upstream streams */                           \
    X(h2_up_rst, mitm_h2_upstream_rst)   /* upstream streams the origin reset */                \
    X(h2_goaway, mitm_h2_goaway)         /* GOAWAYs from origins */                             \
    X(h2_stalls, mitm_h2_flow_stalls)    /* a body waited for the other side to take bytes */ \
    X(h2_buffered, mitm_h2_buffered_bytes) /* h2 body bytes held now (all sessions) */     \
    X(h2_buffered_peak, mitm_h2_buffered_peak) /* ... the most since start */                \
    X(h2_buffer_alloc, mitm_h2_buffer_alloc)   /* what their buffers take now */              \
    X(h2_narrowed, mitm_h2_windows_narrowed) /* times over h2_max_buffered: windows narrowed */

struct mitm_stats {
#define X(field, key) uint64_t field;
    MITM_STATS(X)
#undef X
};
extern const struct log_counter mitm_counters[];

/* One per engine, over its flow environment (which must outlive it). */
struct mitm *mitm_new(const struct flow_env *env);
/* Frees it; every flow it took must be over (the flow owners close them
 * first at shutdown). */
void mitm_free(struct mitm *m);
/* Takes a bundle's settings (copied; the objects they point at must live
 * until the next mitm_configure or mitm_free): flows started afterwards
 * use them, and so does every later request of a running flow. */
void mitm_configure(struct mitm *m, const struct mitm_opts *o);
/* What flow_env.intercept points at (NULL while no host is configured). */
const struct flow_intercept *mitm_intercept(struct mitm *m);
/* 1 when the UDP flow |f| is QUIC (UDP/443) to a MITM host and must be
 * refused so the client falls back to TCP (counted). */
int mitm_blocks_quic(struct mitm *m, const struct flow *f);
/* 1 when a flow to |port| could be intercepted by the host list. */
int mitm_port_used(const struct mitm *m, uint16_t port);
void mitm_stats(const struct mitm *m, struct mitm_stats *out);

#endif
