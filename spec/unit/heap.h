#ifndef CHUTE_SPEC_UNIT_HEAP_H
#define CHUTE_SPEC_UNIT_HEAP_H

/* The heap in use as glibc counts it, for tests that check what a thing
 * keeps; 0 elsewhere, and under ASan, whose allocator mallinfo2 does not
 * see (such a test then compares zeros). */

#include <malloc.h>
#include <stddef.h>

static inline size_t
heap_in_use(void)
{
#ifdef __GLIBC__
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
#else
    return 0;
#endif
}

#endif
