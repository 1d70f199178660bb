#ifndef CHUTE_MEM_SLICE_H
#define CHUTE_MEM_SLICE_H

#include <stddef.h>
#include <string.h>
#include <strings.h>

/* A byte view into memory owned by someone else: never NUL-terminated,
 * never freed through the slice (h2o's h2o_iovec_t). */
struct mem_slice {
    const char *ptr;
    size_t len;
};

#define MEM_SLICE_LIT(s) ((struct mem_slice){(s), sizeof(s) - 1})

static inline struct mem_slice
mem_slice(const void *p, size_t n)
{
    return (struct mem_slice){(const char *)p, n};
}

static inline int
mem_slice_eq(struct mem_slice a, struct mem_slice b)
{
    return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
}

/* ASCII case-insensitive comparison, for header names and tokens. */
static inline int
mem_slice_ieq(struct mem_slice a, const char *lit)
{
    size_t n = strlen(lit);
    return a.len == n && strncasecmp(a.ptr, lit, n) == 0;
}

#endif
