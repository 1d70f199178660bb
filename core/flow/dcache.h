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

struct flow_dcache;

struct flow_dcache_stats {
    uint64_t hits, misses, inserts, evictions;
    size_t size, capacity;
};

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
