#ifndef CHUTE_MEM_ARENA_H
#define CHUTE_MEM_ARENA_H

/* A per-request arena (h2o's h2o_mem_pool_t): allocations are bumped out
 * of chunks and never freed one by one; mem_arena_reset() drops them all
 * at once when the request ends. A block larger than a quarter of a chunk
 * gets its own allocation, so one big header cannot waste a chunk's tail.
 * Reset keeps the first chunk, so an arena reused request after request
 * reaches a steady state with no malloc at all for small requests.
 *
 * The arena struct is the caller's (embed it); nothing is shared between
 * arenas and none of this is thread-safe. Every allocation is aligned for
 * any type (max_align_t). Out of memory returns NULL: the caller answers
 * the request with an error, the engine does not stop. */

#include <stddef.h>

#include "mem/slice.h"

/* Bytes one chunk takes from malloc, its header included. */
#define MEM_ARENA_CHUNK 4096

struct mem_arena_chunk;
struct mem_arena_large;

struct mem_arena {
    struct mem_arena_chunk *_chunks; /* newest first */
    size_t _used;                    /* bytes handed out of the newest chunk */
    struct mem_arena_large *_large;  /* blocks of their own, newest first */
    size_t _bytes;                   /* held: chunk payloads plus large blocks */
};

/* An empty arena: nothing is allocated until the first mem_arena_alloc. */
void mem_arena_init(struct mem_arena *a);

/* |n| bytes (uninitialised), valid until the next reset or fini. NULL when
 * out of memory or |n| is absurd (the arena is unchanged then). n == 0
 * gives a valid pointer to no bytes. */
void *mem_arena_alloc(struct mem_arena *a, size_t n);

/* A copy of |n| bytes of |p| (p may be NULL when n == 0), or NULL. */
void *mem_arena_memdup(struct mem_arena *a, const void *p, size_t n);

/* A NUL-terminated copy of the C string |s|, or of the |n| bytes at |s|
 * (which may hold no NUL); NULL when out of memory. */
char *mem_arena_strdup(struct mem_arena *a, const char *s);
char *mem_arena_strndup(struct mem_arena *a, const char *s, size_t n);

/* The slice |s| copied into the arena; {NULL, 0} when out of memory (an
 * empty slice copies to an empty slice with a valid pointer). */
struct mem_slice mem_arena_slice(struct mem_arena *a, struct mem_slice s);

/* Frees every allocation except the first chunk, which is kept for the
 * next request. Pointers handed out before are invalid afterwards. */
void mem_arena_reset(struct mem_arena *a);

/* Frees everything; the arena may be init'ed again. */
void mem_arena_fini(struct mem_arena *a);

/* Bytes the arena holds from malloc (payload, headers excluded): what a
 * request costs, for limits and stats. */
size_t mem_arena_bytes(const struct mem_arena *a);

#endif
