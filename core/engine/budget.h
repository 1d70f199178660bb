#ifndef CHUTE_ENGINE_BUDGET_H
#define CHUTE_ENGINE_BUDGET_H

/* memory_limit (chute_options, or chute.config's key) sized into what each
 * part may take: lwIP's heap and pools, the flow caps, DNS, Lua and the
 * rule sets. One table of shares in budget.c; the parts get plain numbers
 * through their own option structs (they never include engine/). */

#include <stddef.h>

struct engine;
struct script;

#define ENGINE_BUDGET_MIN ((size_t)8 << 20) /* below this nothing fits */

struct engine_budget {
    size_t limit;         /* bytes; 0: no limit, every field 0 (today's defaults) */
    size_t fixed;         /* counted for code, libraries, stacks, packet queues */
    size_t lwip_heap;     /* bytes of lwIP's packet heap chute may use */
    size_t lwip_pools;    /* bytes the pool counts below take (estimate) */
    size_t pcbs, listeners, segs, pbufs; /* lwIP pool elements */
    size_t tcp_flows, udp_flows;         /* new flows beyond these are refused */
    size_t flow_bytes;    /* what the flows are counted at */
    size_t rules;         /* bytes the bundle's rule sets may hold */
    size_t lua;           /* the Lua state's cap, bytes */
    size_t dns_cache, fake_ips;          /* resolver cache entries, fake-IP mappings */
    size_t dns_bytes;
    size_t queue;         /* packets_in's queue, packets */
    size_t wq;            /* the packet path's write queue, bytes */
};

/* Sizes |limit| bytes (0: no limit: |*b| all 0). 0, or -1 when |limit| is
 * below ENGINE_BUDGET_MIN. The parts add up to at most |limit|. */
int engine_budget_size(size_t limit, struct engine_budget *b);

/* "15 MiB", "512 KiB", "1.5 MiB": |v| bytes for messages. */
const char *engine_budget_fmt(size_t v, char *buf, size_t n);

/* |v| capped by a budget figure |cap| (0: no cap; |v| 0 means "the
 * part's default", which the cap then replaces). */
size_t engine_budget_cap(size_t v, size_t cap);

/* Sizes the budget for |s| (|opt_limit|, chute_options.memory_limit, wins over the
 * bundle's memory_limit), refuses a bundle whose rule sets alone take
 * more than their share or whose Lua state is over its cap, and sets the
 * cap. 0 with |*b| filled, or -1 with |err|. */
int engine_budget_for(size_t opt_limit, struct script *s, struct engine_budget *b, char *err,
                      size_t errlen);

/* Logs the figures of |b| (one line), when it has a limit. */
void engine_budget_log(const struct engine_budget *b);

/* Before the netstack starts: lwIP's heap and pools from e->budget. */
void engine_budget_netstack(const struct engine *e);

#endif
