#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mem/pages.h"
#include "mitm/h2_int.h"

/* nghttp2's allocations, for both roles: its 16 KiB frame buffer (made
 * with each session, written a frame at a time) is mapped as BearSSL's
 * buffer is (mem/pages.h), so an idle session keeps only the page its few
 * frames touched; everything smaller stays on the heap. Each block carries
 * its size in front, since nghttp2 frees without one. */

#define BIG 16384

struct hdr {
    size_t n;
    size_t mapped;
} __attribute__((aligned(16)));

static void *
get(size_t n, int zero)
{
    if (n > SIZE_MAX - sizeof(struct hdr))
        return NULL;
    size_t total = n + sizeof(struct hdr);
    struct hdr *h = n >= BIG ? mem_pages_alloc(total) : zero ? calloc(1, total) : malloc(total);
    if (h == NULL)
        return NULL;
    h->n = n;
    h->mapped = n >= BIG;
    return h + 1;
}

static void
put(void *p, void *ud)
{
    (void)ud;
    if (p == NULL)
        return;
    struct hdr *h = (struct hdr *)p - 1;
    if (h->mapped)
        mem_pages_free(h, h->n + sizeof(*h));
    else
        free(h);
}

static void *
a_malloc(size_t n, void *ud)
{
    (void)ud;
    return get(n, 0);
}

static void *
a_calloc(size_t k, size_t n, void *ud)
{
    (void)ud;
    if (n != 0 && k > SIZE_MAX / n)
        return NULL;
    return get(k * n, 1); /* mapped pages come zeroed */
}

static void *
a_realloc(void *p, size_t n, void *ud)
{
    if (p == NULL)
        return get(n, 0);
    struct hdr *h = (struct hdr *)p - 1;
    if (!h->mapped && n < BIG) {
        struct hdr *q = realloc(h, n + sizeof(*h));
        if (q == NULL)
            return NULL;
        q->n = n;
        return q + 1;
    }
    void *q = get(n, 0);
    if (q == NULL)
        return NULL;
    memcpy(q, p, h->n < n ? h->n : n);
    put(p, ud);
    return q;
}

nghttp2_mem *
h2_alloc(void)
{
    static nghttp2_mem m = {NULL, a_malloc, put, a_calloc, a_realloc};
    return &m;
}
