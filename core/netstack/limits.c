#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lwip/mem.h"
#include "lwip/memp.h"
#include "lwip/priv/memp_priv.h"
#include "lwip/stats.h"

#include "log/log.h"
#include "netstack/netstack_int.h"

/* lwIP's sizes are build options (its pools are static arrays, checked
 * with #if); netstack_set_limits lowers them at run time without patching
 * lwIP:
 *  - the heap: lwIP's mem_malloc asks netstack_heap_malloc (lwipopts.h),
 *    which refuses past the cap as a full heap does (ERR_MEM, a dropped
 *    segment: recoverable). mem.c keeps lwip_stats.mem.used exact (it
 *    stores each block's size in front of it);
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
static size_t cap = MEM_SIZE;

void
netstack_set_limits(const struct netstack_limits *l)
{
    want = l != NULL ? *l : (struct netstack_limits){0};
}

static size_t peak; /* of lwIP's blocks and the chunks together */

void *
netstack_heap_malloc(size_t n)
{
    size_t used = netstack_heap_used();
    if (n > cap || used > cap - n)
        return NULL; /* mem.c counts the refusal in lwip_stats.mem.err */
    if (used + n > peak)
        peak = used + n;
    return malloc(n);
}

size_t
netstack_heap_used(void)
{
    return lwip_stats.mem.used + netstack_tx_bytes() + netstack_rx_bytes();
}

void
netstack_heap_note_peak(void)
{
    if (netstack_heap_used() > peak)
        peak = netstack_heap_used();
}

size_t
netstack_heap_max(void)
{
    return peak > lwip_stats.mem.max ? peak : lwip_stats.mem.max;
}

size_t
netstack_heap_cap(void)
{
    return cap;
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
    cap = want.heap != 0 && want.heap < MEM_SIZE ? want.heap : MEM_SIZE;
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
