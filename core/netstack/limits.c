#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lwip/mem.h"
#include "lwip/memp.h"
#include "lwip/priv/memp_priv.h"
#include "lwip/stats.h"

#include "log/log.h"
#include "netstack/netstack_int.h"

/* lwIP's sizes are build options (its pools and heap are static arrays,
 * checked with #if); netstack_set_limits lowers them at run time without
 * patching lwIP:
 *  - the heap: one block allocated at its tail and never touched makes
 *    the rest the whole heap (first fit hands out the lowest free block),
 *    so allocations past the cap fail as a full heap does (ERR_MEM, a
 *    dropped segment: recoverable) and the tail's pages stay untouched;
 *  - a pool: its free list is rebuilt over its first N elements and the
 *    pages of the others are given back (memp_init touched them all:
 *    7 MiB of RSS at the build's sizes). Only a pool with nothing taken is
 *    rebuilt, so a second engine in the process may raise or lower them. */

_Static_assert(NETSTACK_HEAP_MAX == MEM_SIZE, "netstack.h's NETSTACK_HEAP_MAX is MEM_SIZE");
_Static_assert(NETSTACK_PCBS_MAX == MEMP_NUM_TCP_PCB, "NETSTACK_PCBS_MAX");
_Static_assert(NETSTACK_LISTENERS_MAX == MEMP_NUM_TCP_PCB_LISTEN, "NETSTACK_LISTENERS_MAX");
_Static_assert(NETSTACK_SEGS_MAX == MEMP_NUM_TCP_SEG, "NETSTACK_SEGS_MAX");
_Static_assert(NETSTACK_PBUFS_MAX == MEMP_NUM_PBUF, "NETSTACK_PBUFS_MAX");

#define POOL_PBUF_POOL_SMALL 8 /* PBUF_POOL: nothing chute runs allocates from it */

static struct netstack_limits want;
static void *reserve;       /* the heap's tail, or NULL */
static size_t reserve_used; /* what it adds to lwip_stats.mem.used */

void
netstack_set_limits(const struct netstack_limits *l)
{
    want = l != NULL ? *l : (struct netstack_limits){0};
}

size_t
netstack_heap_used(void)
{
    size_t u = lwip_stats.mem.used;
    return u > reserve_used ? u - reserve_used : 0;
}

size_t
netstack_heap_cap(void)
{
    return MEM_SIZE - reserve_used;
}

static void
set_reserve(size_t cap)
{
    if (reserve != NULL) {
        if (netstack_heap_used() != 0)
            return; /* something holds heap: keep the cap there is */
        mem_free(reserve);
        reserve = NULL;
        reserve_used = 0;
    }
    if (cap == 0 || cap >= MEM_SIZE)
        return;
    /* The lowest |cap| bytes first, so the reserve lands above them. */
    void *low = mem_malloc((mem_size_t)cap);
    if (low == NULL)
        return;
    size_t before = lwip_stats.mem.used;
    for (size_t want_len = MEM_SIZE - cap; reserve == NULL && want_len > 256; want_len -= 64)
        reserve = mem_malloc((mem_size_t)(want_len - 64));
    reserve_used = reserve != NULL ? lwip_stats.mem.used - before : 0;
    mem_free(low);
}

static void
size_pool(memp_t type, size_t n)
{
    const struct memp_desc *d = memp_pools[type];
    if (n == 0 || n > d->num)
        n = d->num;
    if (d->stats->used != 0 || d->stats->avail == n)
        return;
    size_t sz = MEMP_SIZE + MEMP_ALIGN_SIZE(d->size);
    uint8_t *base = (uint8_t *)LWIP_MEM_ALIGN(d->base);
    *d->tab = NULL;
    for (size_t i = n; i-- > 0;) { /* the head is the first element: its pages first */
        struct memp *m = (struct memp *)(void *)(base + i * sz);
        m->next = *d->tab;
        *d->tab = m;
    }
    d->stats->avail = (mem_size_t)n;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)(base + n * sz) + page - 1) & ~(page - 1);
    uintptr_t hi = (uintptr_t)(base + (size_t)d->num * sz) & ~(page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void
netstack_limits_apply(void)
{
    set_reserve(want.heap);
    size_pool(MEMP_TCP_PCB, want.pcbs);
    size_pool(MEMP_TCP_PCB_LISTEN, want.listeners);
    size_pool(MEMP_TCP_SEG, want.segs);
    size_pool(MEMP_PBUF, want.pbufs);
    size_pool(MEMP_PBUF_POOL, want.heap != 0 ? POOL_PBUF_POOL_SMALL : 0);
    if (want.heap != 0)
        LOG_INFO("netstack: heap capped at %zu KiB of %d MiB; pools: %u pcbs, %u listeners, "
                 "%u segments, %u pbufs", netstack_heap_cap() >> 10, MEM_SIZE >> 20,
                 (unsigned)memp_pools[MEMP_TCP_PCB]->stats->avail,
                 (unsigned)memp_pools[MEMP_TCP_PCB_LISTEN]->stats->avail,
                 (unsigned)memp_pools[MEMP_TCP_SEG]->stats->avail,
                 (unsigned)memp_pools[MEMP_PBUF]->stats->avail);
}
