#ifndef CHUTE_OUTBOUND_SET_INT_H
#define CHUTE_OUTBOUND_SET_INT_H

/* The set's insides, shared by set.c (ids, names, picks) and health.c (the
 * checks). Only the loop thread touches a set. */

#include "outbound/hs_wire.h"
#include "outbound/set.h"

enum member_health { HEALTH_UNKNOWN = 0, HEALTH_UP, HEALTH_DOWN };

struct member {
    int policy;               /* DIRECT, REJECT or a proxy id */
    uint64_t seed;            /* load-balance: the hash of the member's name */
    enum member_health health;/* UNKNOWN counts as healthy */
    int latency;              /* ms of the last good check, -1 none */
    double retry_at;          /* groups without checks: when a down mark expires (0: never) */
    char error[64];           /* the last check's failure ("" none) */
};

struct health_group;
struct pool;

/* set_pool.c: a proxy's pool and what its connector needs to find the
 * proxy (the pool's |ud|; a reload moves the pool to the new set's slot). */
struct pool_slot {
    struct pool *pool;        /* NULL until a flow uses the proxy */
    struct outbound_set *set;
    size_t idx;               /* into set->proxies */
};

struct group {
    struct outbound_group_cfg cfg;
    struct member *m;         /* cfg.nmembers */
    int cur;                  /* url-test: the member in use, -1 not chosen yet */
    struct health_group *hg;  /* health.c's, NULL while not checking */
};

struct outbound_set {
    int refs;
    /* The view: what the checks' outbound_open() calls see as env->set.
     * It forwards to the owner, so the refs those opens take do not keep
     * the owner alive (the last outside unref still stops and frees it),
     * and the opens' own reports are ignored (the check records its
     * result itself, without pulling other groups' checks forward). */
    struct outbound_set *owner;
    struct outbound_set *view;
    struct outbound_proxy *proxies;
    size_t nproxies;
    struct group *groups;
    size_t ngroups;
    int *names;               /* open addressing: ids, -1 empty */
    size_t names_mask;
    const char **interned;  /* per policy id past the built-ins: names that live forever */
    /* Where each DIRECT/proxy id is a member, for report() once per flow:
     * uses[use_at[id] .. use_at[id + 1]) (id 1, REJECT, has none). */
    size_t *use_at;
    struct member_use { uint32_t g, m; } *uses;
    struct pool_slot *pools;  /* nproxies, NULL until the first pool */
    const struct outbound_env *env; /* set by outbound_set_start */
    int running;
    struct outbound_set_stats st;
};

/* health.c (prefixed: the library is one namespace) */
void outbound_set_health_start(struct outbound_set *s);
void outbound_set_health_stop(struct outbound_set *s);
/* A report marked member |m| of group |g| down: check it within 1 s. */
void outbound_set_health_recheck(struct outbound_set *s, size_t g, size_t m);
/* A check's response as it arrives, in pieces of any size: keeps the
 * status line's first bytes and returns what they are so far, as
 * outbound_hs_http_status does (status, 0: more needed, -1: not HTTP).
 * No I/O: spec/fuzz/health_fuzz.c drives it. */
struct outbound_health_line {
    size_t got;
    uint8_t b[OUTBOUND_HTTP_STATUS_LEN];
};
int outbound_health_feed(struct outbound_health_line *l, const void *p, size_t n);

/* set.c: records a check of member |m| of group |g|: |ms| >= 0 up with
 * that latency, else down with |err|. */
void outbound_set_check_result(struct outbound_set *s, size_t g, size_t m, int ms, const char *err);

/* set_pool.c. The pool of proxy |policy| for a new connection (made on
 * first use), or NULL: no pool for it, or the set is not running. */
struct pool *outbound_set_pool(struct outbound_set *s, int policy);
/* A reload: takes over the pools of |prev|'s proxies that are the same
 * (same name, same settings) in |s|. */
void outbound_set_pools_carry(struct outbound_set *s, struct outbound_set *prev);
/* Whether a connection made for |a| is as good for |b|: same server,
 * credentials, TLS and pool settings (never for proxies with a CA file of
 * their own: the file may have changed). */
int outbound_set_same_proxy(const struct outbound_proxy *a, const struct outbound_proxy *b);
/* Frees every pool (the set stops). */
void outbound_set_pools_drop(struct outbound_set *s);
/* A group marked proxy |policy| down: its idle connections go. */
void outbound_set_pool_drain(struct outbound_set *s, int policy);

#endif
