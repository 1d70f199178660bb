#ifndef CHUTE_INBOUND_INBOUND_H
#define CHUTE_INBOUND_INBOUND_H

/* Proxy listeners (SOCKS5, HTTP) that work without root. Each listener owns
 * the connections it accepted; closing it closes them. */

#include <stddef.h>
#include <stdint.h>

#include "flow/flow.h"

struct inbound_listener;

/* SOCKS5 (RFC 1929) / HTTP Basic credentials: |n| pairs, users[2i] the
 * name, users[2i+1] the password; n == 0: no auth. */
struct inbound_users {
    size_t n;
    char *const *users;
};

struct inbound_opts {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    const char *text; /* the address as written, for logs (read during the call) */
    /* The engine's, rewritten in place by a reload: new handshakes use the
     * new table. */
    const struct inbound_users *users;
    /* FLOW_IN_REVERSE: the origin every connection goes to (copied). */
    const struct flow_addr *target;
    /* With FLOW_IN_SOCKS: the mixed port, SOCKS5 and HTTP on one listener,
     * told apart by each client's first byte (mixed.c); |users| for both. */
    int mixed;
};

/* Shared head of every accepted connection: the listener keeps them in a
 * list so shutdown can close them all, and those whose handshake has not
 * finished in a second list, oldest first (the caps below). */
struct inbound_conn {
    struct inbound_conn *_prev, *_next;
    struct inbound_listener *_l;
    void (*_close)(struct inbound_conn *c); /* closes sockets, frees c */
    struct inbound_conn *_hs_prev, *_hs_next; /* NULL once the handshake finished */
    double _hs_since; /* accepted at, io_mono_now() */
    uint8_t _src[16]; /* the client's address (v4 mapped), for the per-source cap */
};

/* Connections that have not finished their handshake (a SOCKS5 request,
 * the first HTTP request head), per listener: a new one over either cap
 * closes the oldest unfinished one (of its source, or of all), so a flood
 * of silent or trickling clients costs a bounded number of descriptors and
 * the newest clients, who may be real, get in. A handshake must finish
 * within timeouts.connect. */
#define INBOUND_HS_MAX 1024
#define INBOUND_HS_PER_SOURCE 256

/* The listeners' counters, one X(field, key) each (log/counter.h). */
#define INBOUND_STATS(X)                                                                           \
    X(hs_pending, handshakes)            /* unfinished handshakes now */                         \
    X(hs_timeouts, hs_timeouts)          /* closed: not finished within timeouts.connect */      \
    X(hs_source_drops, hs_source_drops)  /* closed: the oldest of a source over its cap */       \
    X(hs_global_drops, hs_global_drops)  /* closed: the oldest of all over INBOUND_HS_MAX */      \
    X(auth_backoffs, auth_backoffs)      /* refused unchecked: the source guessed too often */

struct inbound_stats {
#define X(field, key) uint64_t field;
    INBOUND_STATS(X)
#undef X
};
extern const struct log_counter inbound_counters[];

/* Adds |l|'s counters to |out| (NULL |l|: nothing). */
void inbound_stats_add(const struct inbound_listener *l, struct inbound_stats *out);

/* Opens a listener of |kind| (FLOW_IN_SOCKS, FLOW_IN_HTTP, FLOW_IN_REVERSE) on the address
 * in |cfg|. Returns NULL with |err| naming the address and the reason. */
/* Accepted flows go through |env| (kept: it must outlive the listener). */
struct inbound_listener *inbound_listen(const struct flow_env *env, enum flow_inbound kind,
                                        const struct inbound_opts *o, char *err, size_t errlen);
/* The TCP port |l| listens on; 0 for NULL. */
int inbound_port(const struct inbound_listener *l);
/* 1 if a connection to |ss| would reach |l| (NULL: 0): its port, and its
 * address, loopback, or any address for a listener on the wildcard. */
int inbound_listener_is(const struct inbound_listener *l, const struct sockaddr_storage *ss);
/* Stops accepting and closes every connection of the listener. */
void inbound_close(struct inbound_listener *l);

/* Used by the protocol files. */
const struct flow_env *inbound_env(const struct inbound_listener *l);
/* Links |c| (accepted from |peer|) as in its handshake, first closing the
 * oldest unfinished connection over a cap (never |c|). */
void inbound_conn_link(struct inbound_listener *l, struct inbound_conn *c,
                       const struct sockaddr_storage *peer);
/* The handshake of |c| finished: the caps and the deadline no longer apply. */
void inbound_conn_ready(struct inbound_conn *c);
/* The protocol's own handshake timer closed |c| (counted). */
void inbound_conn_timed_out(struct inbound_conn *c);
void inbound_conn_unlink(struct inbound_conn *c);

struct flow_relay;
struct flow_upstream;
/* relay_up.c: relays the client socket |fd| with the upstream stream
 * flow_open delivered (two bare sockets are spliced). |reply| goes to
 * the client first, then the proxy's early bytes, and |pre_up| to the
 * upstream first. Same contract as flow_relay_start; on failure |fd| and
 * the upstream are still the caller's. */
int inbound_relay_upstream(struct flow_relay *r, const struct flow_env *e, int fd,
                           const struct flow_upstream *up, const void *pre_up, size_t pre_up_len,
                           const void *reply, size_t reply_len, struct flow *f,
                           void (*done)(struct flow_relay *, void *, const char *), void *arg);

/* A TCP flow accepted on |fd| from |peer|: network, inbound, src and
 * local (the listener's address) set, the rest zero as calloc left it. */
void inbound_flow_init(struct flow *f, enum flow_inbound kind, int fd,
                       const struct sockaddr_storage *peer);

/* Per-protocol: takes a freshly accepted non-blocking socket. */
void inbound_socks5_accept(struct inbound_listener *l, int fd, const struct sockaddr_storage *peer);
void inbound_http_accept(struct inbound_listener *l, int fd, const struct sockaddr_storage *peer);
void inbound_reverse_accept(struct inbound_listener *l, int fd, const struct sockaddr_storage *peer);
void inbound_mixed_accept(struct inbound_listener *l, int fd, const struct sockaddr_storage *peer);
/* inbound_socks5_accept with |secs| left of the handshake deadline (the
 * mixed port spent the rest waiting for the first byte). */
void inbound_socks5_accept_within(struct inbound_listener *l, int fd,
                                  const struct sockaddr_storage *peer, double secs);
/* FLOW_IN_REVERSE: the listener's origin. */
const struct flow_addr *inbound_target(const struct inbound_listener *l);

/* The listener's current auth table (from the current script: a reload
 * applies to new handshakes). Returns 1 if |user|/|pass| match or the
 * listener has no users. */
int inbound_auth_required(const struct inbound_listener *l);
/* For a client |c| in its handshake: 0 also while its address is backed
 * off after repeated wrong credentials (checked: nothing; counted). */
int inbound_auth_check(struct inbound_conn *c, const char *user, size_t ulen, const char *pass,
                       size_t plen);

#endif
