#ifndef CHUTE_OUTBOUND_SET_H
#define CHUTE_OUTBOUND_SET_H

/* The policies of one loaded bundle: its proxies and policy groups, by id.
 * Ids 0 and 1 are DIRECT and REJECT (enum flow_policy), then the proxies in
 * declaration order, then the groups. A group resolves to one of its
 * members when a connection opens:
 *   select        the member the bundle (or chute.select) chose
 *   fallback      the first healthy member, in order
 *   url-test      the lowest latency, switching only when another member
 *                 is faster by more than the tolerance
 *   load-balance  consistent (rendezvous) hashing of the destination over
 *                 the healthy members
 * Health checks: every |interval| an HTTP GET of the group's URL through
 * each member, timed to the status line; a failed connection through a
 * member also marks it down at once and brings its next check forward.
 * Refcounted: connections in progress keep the set they started with
 * alive across a reload. */

#include <stddef.h>
#include <stdint.h>

#include "log/counter.h"
#include "outbound/outbound.h"
#include "outbound/proxy.h"
#include "pool/pool.h"

enum outbound_group_type {
    OUTBOUND_GROUP_SELECT = 0,
    OUTBOUND_GROUP_FALLBACK,
    OUTBOUND_GROUP_URL_TEST,
    OUTBOUND_GROUP_LOAD_BALANCE,
};

struct outbound_group_cfg {
    char name[64];
    enum outbound_group_type type;
    int *members;          /* policy ids: proxies, DIRECT, REJECT (malloc'd; the set owns it) */
    size_t nmembers;
    int selected;          /* select: index into members */
    char url[256];         /* health check: http://host[:port]/path */
    double interval;       /* seconds between checks (0: no checks) */
    double timeout;        /* seconds per check */
    double tolerance;      /* url-test: milliseconds */
    char where[96];        /* "main.lua:12" */
};

/* Builds a set; takes ownership of both arrays (malloc'd) and the members
 * lists. NULL when out of memory. The set starts with one reference. */
struct outbound_set *outbound_set_new(struct outbound_proxy *proxies, size_t nproxies,
                                      struct outbound_group_cfg *groups, size_t ngroups);
struct outbound_set *outbound_set_ref(struct outbound_set *s);
/* Drops a reference; the last one stops the checks and frees the set. */
void outbound_set_unref(struct outbound_set *s);

/* Starts the health checks on |env|'s loop (env must outlive the set's
 * checks: outbound_set_stop stops them). Keeps the select choices and the
 * health results of |prev| (a reload) for groups and members of the same
 * names, and takes over |prev|'s connection pools of proxies whose
 * settings did not change (|prev| loses them: its stop drains the rest). */
void outbound_set_start(struct outbound_set *s, const struct outbound_env *env,
                        const struct outbound_set *prev);
/* set_diff.c: says what a reload changed from |was| to |now| ("reload:
 * proxies +jp -hk ~sg; groups +auto"), at info; at debug when nothing did.
 * Either NULL: nothing. */
void outbound_set_log_diff(const struct outbound_set *was, const struct outbound_set *now);
/* Stops the checks and frees the set's connection pools. */
void outbound_set_stop(struct outbound_set *s);

/* True if a proxy of the set speaks TLS (Trojan, https). NULL: false. */
int outbound_set_needs_tls(const struct outbound_set *s);

/* Policy id of |name| (a proxy, a group, "DIRECT", "REJECT"), or -1. */
int outbound_set_lookup(const struct outbound_set *s, const char *name);
/* Name of |policy|: "DIRECT", "REJECT", a proxy's or a group's; the
 * string lives as long as the process (interned), so flows may keep it. */
const char *outbound_set_name(const struct outbound_set *s, int policy);
/* The proxy behind |policy|, or NULL (DIRECT, REJECT, a group). */
const struct outbound_proxy *outbound_set_proxy(const struct outbound_set *s, int policy);
/* Follows groups down to DIRECT, REJECT or a proxy id for a connection to
 * |dst|. */
int outbound_set_pick(struct outbound_set *s, int policy, const struct flow_addr *dst);

/* select groups: choose |member| (a name in the group). 0, or -1 with
 * |err|. */
int outbound_set_select(struct outbound_set *s, const char *group, const char *member, char *err,
                        size_t errlen);

/* A connection through proxy |policy| failed (1) or worked (0): feeds the
 * health state between checks. */
void outbound_set_report(struct outbound_set *s, int policy, int failed);
/* The same with the reason a failure shows in the groups ("connection
 * failed" above; |why| is copied, cut to 63 bytes). */
void outbound_set_report_why(struct outbound_set *s, int policy, int failed, const char *why);

/* One line per group for the stats log: "auto=url-test:hk hk=12ms jp=down". */
void outbound_set_describe(const struct outbound_set *s, char *buf, size_t len);

/* The connection pools (core/pool), one line per proxy that has one:
 * "tj warm=12 cold=1 resumed=3 ..." (pool_counters' keys), lines joined
 * by '\n'; "" when none. */
void outbound_set_pools_describe(const struct outbound_set *s, char *buf, size_t len);
/* The counters of |proxy|'s pool: 0, or -1 when it has none (yet). */
int outbound_set_pool_stats(const struct outbound_set *s, const char *proxy,
                            struct pool_stats *out);
/* set_view.c: what a control API shows of a set. Policy ids run from 0 to
 * outbound_set_count() - 1 (DIRECT, REJECT, proxies, groups). */
struct outbound_set_entry {
    const char *name;      /* interned: lives as long as the process */
    const char *type;      /* Clash's word: "Direct", "Reject", "Socks5", "Http",
                            * "Shadowsocks", "Trojan", "Selector", "Fallback",
                            * "URLTest", "LoadBalance" */
    int is_group;
    int udp;               /* the policy carries UDP */
    const int *members;    /* groups: policy ids, nmembers of them (the set's) */
    size_t nmembers;
    int now;               /* groups: the member in use now (a policy id), -1 none yet */
    int alive;             /* 0 when a check or a connection marked it down */
    int latency;           /* ms of the last good check through it, -1 none */
    uint64_t silent;       /* proxies: requests it never answered (outbound_ss_watch) */
};
size_t outbound_set_count(const struct outbound_set *s);
/* Fills |out| for |policy|: 0, or -1 for an id out of range. */
int outbound_set_entry(const struct outbound_set *s, int policy, struct outbound_set_entry *out);

/* The groups' counters, one X(field, key) each (log/counter.h). */
#define OUTBOUND_SET_STATS(X)                                                                      \
    X(checks, health_checks)           /* health checks run */                                     \
    X(check_failures, health_failures)                                                             \
    X(switches, group_switches)        /* times a group changed the member it uses */             \
    X(silent, proxy_silent)            /* requests no byte came back for (silent.c) */

struct outbound_set_stats {
#define X(field, key) uint64_t field;
    OUTBOUND_SET_STATS(X)
#undef X
};
/* OUTBOUND_SET_STATS as a table over struct outbound_set_stats. */
extern const struct log_counter outbound_set_counters[];
void outbound_set_stats(const struct outbound_set *s, struct outbound_set_stats *out);

/* Checks a health-check URL: "http://host[:port]/path" (an IPv6 host in
 * brackets; no path means "/"). 0, or -1 with |err| saying what is wrong
 * ("https health checks are not supported yet: use http://", ...). For the
 * loader, at load time. */
int outbound_set_check_url(const char *url, char *err, size_t errlen);

/* Records a health check of |member| in |group| as if one had just
 * finished: |ms| >= 0 up with that latency, < 0 down. For tests and
 * tools; 0, or -1 for an unknown group or member. */
int outbound_set_note_latency(struct outbound_set *s, const char *group, const char *member,
                              int ms);

#endif
