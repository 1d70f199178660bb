#include <math.h>

#include "pool/pool.h"

/* Demand is counted per whole second in a ring of the last minute. The
 * busiest second is the size: it is the burst of new flows the pool must
 * meet from idle connections while refills (a TCP and a TLS handshake,
 * well under a second) catch up; a steadier rate needs fewer. A minute
 * without a flow empties the pool: warm connections for a server nobody
 * uses cost the server a socket each. */

void
pool_demand_init(struct pool_demand *d)
{
    for (int i = 0; i < POOL_DEMAND_SECONDS; i++) {
        d->count[i] = 0;
        d->sec[i] = -1;
    }
}

void
pool_demand_note(struct pool_demand *d, double now)
{
    int64_t s = (int64_t)floor(now);
    int i = (int)(((s % POOL_DEMAND_SECONDS) + POOL_DEMAND_SECONDS) % POOL_DEMAND_SECONDS);

    if (d->sec[i] != s) {
        d->sec[i] = s;
        d->count[i] = 0;
    }
    if (d->count[i] < UINT32_MAX)
        d->count[i]++;
}

unsigned
pool_demand_target(const struct pool_demand *d, double now, unsigned max)
{
    int64_t s = (int64_t)floor(now);
    uint32_t peak = 0;

    for (int i = 0; i < POOL_DEMAND_SECONDS; i++) {
        if (d->sec[i] >= 0 && d->sec[i] > s - POOL_DEMAND_SECONDS && d->sec[i] <= s &&
            d->count[i] > peak)
            peak = d->count[i];
    }
    return peak < max ? peak : max;
}
