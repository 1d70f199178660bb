#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mem/arena.h"

/* Chunks and large blocks keep their header in front of the payload; the
 * alignas on the payload keeps every bump a multiple of ALIGN from an
 * aligned base. */
#define ALIGN alignof(max_align_t)

struct mem_arena_chunk {
    struct mem_arena_chunk *next;
    alignas(max_align_t) unsigned char bytes[];
};

struct mem_arena_large {
    struct mem_arena_large *next;
    size_t len;
    alignas(max_align_t) unsigned char bytes[];
};

#define CHUNK_BYTES (MEM_ARENA_CHUNK - offsetof(struct mem_arena_chunk, bytes))
#define LARGE_OVER (CHUNK_BYTES / 4)

void
mem_arena_init(struct mem_arena *a)
{
    memset(a, 0, sizeof(*a));
}

static void *
alloc_large(struct mem_arena *a, size_t n)
{
    struct mem_arena_large *l;

    if (n > SIZE_MAX - sizeof(*l))
        return NULL;
    l = malloc(sizeof(*l) + n);
    if (l == NULL)
        return NULL;
    l->next = a->_large;
    l->len = n;
    a->_large = l;
    a->_bytes += n;
    return l->bytes;
}

void *
mem_arena_alloc(struct mem_arena *a, size_t n)
{
    size_t need = (n + ALIGN - 1) & ~(ALIGN - 1);
    struct mem_arena_chunk *c;

    if (n > LARGE_OVER)
        return alloc_large(a, n);
    if (need == 0)
        need = ALIGN;
    if (a->_chunks == NULL || CHUNK_BYTES - a->_used < need) {
        c = malloc(MEM_ARENA_CHUNK);
        if (c == NULL)
            return NULL;
        c->next = a->_chunks;
        a->_chunks = c;
        a->_used = 0;
        a->_bytes += CHUNK_BYTES;
    }
    c = a->_chunks;
    a->_used += need;
    return c->bytes + a->_used - need;
}

void *
mem_arena_memdup(struct mem_arena *a, const void *p, size_t n)
{
    void *d = mem_arena_alloc(a, n);

    if (d != NULL && n > 0)
        memcpy(d, p, n);
    return d;
}

char *
mem_arena_strndup(struct mem_arena *a, const char *s, size_t n)
{
    char *d;

    if (n == SIZE_MAX || (d = mem_arena_alloc(a, n + 1)) == NULL)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *
mem_arena_strdup(struct mem_arena *a, const char *s)
{
    return mem_arena_strndup(a, s, strlen(s));
}

struct mem_slice
mem_arena_slice(struct mem_arena *a, struct mem_slice s)
{
    void *d = mem_arena_memdup(a, s.ptr, s.len);

    return d != NULL ? mem_slice(d, s.len) : mem_slice(NULL, 0);
}

static void
free_large(struct mem_arena *a)
{
    while (a->_large != NULL) {
        struct mem_arena_large *l = a->_large;

        a->_large = l->next;
        free(l);
    }
}

void
mem_arena_reset(struct mem_arena *a)
{
    struct mem_arena_chunk *keep = a->_chunks;

    free_large(a);
    if (keep != NULL) {
        /* The oldest chunk is last in the list: free the ones before it. */
        while (keep->next != NULL) {
            struct mem_arena_chunk *c = keep;

            keep = c->next;
            free(c);
        }
    }
    a->_chunks = keep;
    a->_used = 0;
    a->_bytes = keep != NULL ? CHUNK_BYTES : 0;
}

void
mem_arena_fini(struct mem_arena *a)
{
    mem_arena_reset(a);
    free(a->_chunks);
    mem_arena_init(a);
}

size_t
mem_arena_bytes(const struct mem_arena *a)
{
    return a->_bytes;
}
