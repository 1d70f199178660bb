#ifndef CHUTE_ENGINE_TRIM_H
#define CHUTE_ENGINE_TRIM_H

/* The allocator's view of the process (trim.c), a "memory" section of the
 * stats: what malloc hands out now (live bytes), what it holds free (RSS
 * can only include what was touched of it: a large malloc_free beside a
 * rising RSS is retention, not a leak), and the trims after bursts. */

#include <stdint.h>

#include "log/counter.h"

#define ENGINE_MEM_STATS(X)                                                            \
    X(in_use, malloc_in_use) /* bytes allocated (heap chunks and mmapped blocks) */    \
    X(free, malloc_free)     /* bytes malloc holds free in its arenas */               \
    X(trims, malloc_trims)   /* malloc_trim calls after the flow count fell */

struct engine_mem_stats {
#define X(field, key) uint64_t field;
    ENGINE_MEM_STATS(X)
#undef X
};
extern const struct log_counter engine_mem_counters[];

/* Fills |s| (mallinfo2: walks the free lists, so on demand only). */
void engine_mem_stats(struct engine_mem_stats *s);

/* For `chute run`, the process chute owns (an embedding host keeps its
 * own allocator settings): free() gives memory back to the kernel only
 * past ENGINE_TRIM_KEEP of free space at the heap's top. */
#define ENGINE_TRIM_KEEP ((size_t)32 << 20)
void engine_mem_keep_top(void);

#endif
