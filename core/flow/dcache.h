#ifndef CHUTE_FLOW_DCACHE_H
#define CHUTE_FLOW_DCACHE_H

/* The decision cache: (network, inbound, destination, port) -> policy, so
 * new flows to a destination already decided skip Lua. Bounded, least
 * recently used entries go first; a reload empties it (the rule version
 * changes). Only decisions that read nothing but those fields are stored:
 * the script host tells (struct flow's _reads), so a route() that looks at
 * src_ip is never served from here. */

#include <stddef.h>
#include <stdint.h>

#include "flow/flow.h"
#include "log/counter.h"

struct flow_dcache;

/* The decision cache's counters, one X(field, key) each (log/counter.h). */
#define FLOW_DCACHE_STATS(X)                                                                       \
    X(hits, hits)           /* new flows decided without Lua */                                    \
    X(misses, misses)                                                                              \
    X(inserts, inserts)                                                                            \
    X(evictions, evictions) /* entries dropped for new ones (LRU) */                               \
    X(size, size)           /* entries now */                                                      \
    X(capacity, capacity)   /* entries at most */

struct flow_dcache_stats {
#define X(field, key) uint64_t field;
    FLOW_DCACHE_STATS(X)
#undef X
};
/* FLOW_DCACHE_STATS as a table over struct flow_dcache_stats. */
extern const struct log_counter flow_dcache_counters[];

/* |capacity| entries (0 disables the cache: every lookup misses). */
struct flow_dcache *flow_dcache_new(size_t capacity);
void flow_dcache_free(struct flow_dcache *c);

/* On a hit stores the cached policy in |f| (rule "route (cached)") and
 * returns 1. */
int flow_dcache_get(struct flow_dcache *c, struct flow *f);
/* Stores |f|'s decision (made by route(), cacheable). */
void flow_dcache_put(struct flow_dcache *c, const struct flow *f);
/* Forgets everything (a reload). */
void flow_dcache_clear(struct flow_dcache *c);

void flow_dcache_stats(const struct flow_dcache *c, struct flow_dcache_stats *out);

#endif
