#include <malloc.h>

#include "engine/engine.h"
#include "engine/trim.h"
#include "flow/flow.h"
#include "log/log.h"

/* Memory freed after a burst (a SYN flood, a storm of short flows) stays
 * with glibc, in pages it already touched: 16,000 flows come and gone left
 * +30 MiB of RSS. Once the flow count has fallen far below its peak, one
 * malloc_trim gives the free pages back to the kernel; it walks the heap,
 * so it runs only then, from the stats timer. */

#define TRIM_DROP 1000 /* flows fewer than the peak before a trim */

/* lwIP's packet buffers come from malloc (netstack/lwipopts.h); with
 * offload many are 64 KiB, and glibc's default trims the top as soon as
 * 128 KiB of it is free. 8 flows through the TUN then ran 30% slower
 * (10.5 -> 7.3 Gbit/s): each burst faulted in the pages the last free had
 * given back. Up to two heap caps' worth stays; the malloc_trim below
 * still gives it back after a burst. */
void
engine_mem_keep_top(void)
{
#ifdef __GLIBC__
    mallopt(M_TRIM_THRESHOLD, (int)ENGINE_TRIM_KEEP);
#endif
}

static uint64_t trims; /* process-wide, as the allocator is */

const struct log_counter engine_mem_counters[] = {
#define X(field, key) LOG_COUNTER(struct engine_mem_stats, field, key)
    ENGINE_MEM_STATS(X)
#undef X
    LOG_COUNTER_END};

void
engine_mem_stats(struct engine_mem_stats *s)
{
    s->trims = trims;
#ifdef __GLIBC__
    struct mallinfo2 mi = mallinfo2();
    s->in_use = mi.uordblks + mi.hblkhd;
    s->free = mi.fordblks;
#else
    s->in_use = s->free = 0;
#endif
}

void
engine_trim_tick(struct engine *e)
{
    struct flow_table_stats st;
    flow_table_stats(e->flows, &st);
    if (st.active > e->trim_peak)
        e->trim_peak = st.active;
    if (e->trim_peak < st.active + TRIM_DROP)
        return;
#ifdef __GLIBC__
    int freed = malloc_trim(0);
    trims++;
    LOG_DEBUG("memory: %llu flows since a peak of %llu: malloc_trim %s", (unsigned long long)st.active,
              (unsigned long long)e->trim_peak, freed ? "gave pages back" : "found nothing to give");
#endif
    e->trim_peak = st.active;
}
