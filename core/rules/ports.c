#include <stdlib.h>

#include "rules/rules.h"

/* Ranges may overlap in any way, so _build cuts 0..65535 at every range's
 * ends into elementary segments, paints them in tag order (a segment keeps
 * the first, smallest tag), and stores the painted runs sorted: 8 bytes a
 * run and a binary search, where a 65536-entry tag table would take 256 KiB
 * per set. */
struct run {
    uint16_t lo, hi;
    uint32_t tag;
};

struct rules_ports {
    struct run *r; /* pending ranges until _build, then the disjoint runs */
    size_t n, cap;
    int built;
};

struct rules_ports *
rules_ports_new(void)
{
    return calloc(1, sizeof(struct rules_ports));
}

void
rules_ports_free(struct rules_ports *p)
{
    if (p == NULL)
        return;
    free(p->r);
    free(p);
}

int
rules_ports_add(struct rules_ports *p, uint16_t lo, uint16_t hi, uint32_t tag)
{
    if (p == NULL || p->built || lo > hi)
        return -1;
    if (p->n == p->cap) {
        size_t n = p->cap ? p->cap * 2 : 8;
        struct run *r = realloc(p->r, n * sizeof(*r));
        if (r == NULL)
            return -1;
        p->r = r;
        p->cap = n;
    }
    p->r[p->n++] = (struct run){lo, hi, tag};
    return 0;
}

static int
by_tag(const void *x, const void *y)
{
    const struct run *a = x, *b = y;
    return a->tag < b->tag ? -1 : a->tag > b->tag;
}

static int
by_value(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return a < b ? -1 : a > b;
}

/* Index of |v| in the sorted cut points (it is there). */
static size_t
cut_index(const uint32_t *cut, size_t n, uint32_t v)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cut[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Union-find "next unpainted segment at or after i", so each segment is
 * painted once however many ranges cover it. */
static size_t
next_free(size_t *next, size_t i)
{
    size_t root = i;
    while (next[root] != root)
        root = next[root];
    while (next[i] != root) {
        size_t up = next[i];
        next[i] = root;
        i = up;
    }
    return root;
}

int
rules_ports_build(struct rules_ports *p)
{
    if (p == NULL || p->built)
        return -1;
    size_t n = p->n, ncut = 0;
    if (n == 0) {
        p->built = 1;
        return 0;
    }
    uint32_t *cut = malloc(2 * n * sizeof(*cut));
    size_t *next = malloc((2 * n + 1) * sizeof(*next));
    uint32_t *seg_tag = malloc(2 * n * sizeof(*seg_tag));
    struct run *out = malloc(2 * n * sizeof(*out));
    if (cut == NULL || next == NULL || seg_tag == NULL || out == NULL)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        cut[ncut++] = p->r[i].lo;
        cut[ncut++] = (uint32_t)p->r[i].hi + 1;
    }
    qsort(cut, ncut, sizeof(*cut), by_value);
    size_t k = 0;
    for (size_t i = 0; i < ncut; i++)
        if (k == 0 || cut[i] != cut[k - 1])
            cut[k++] = cut[i];
    ncut = k;
    /* Segment j is [cut[j], cut[j + 1]); j == ncut - 1 is the end marker,
     * never painted. */
    for (size_t j = 0; j < ncut; j++)
        next[j] = j;
    qsort(p->r, n, sizeof(*p->r), by_tag);
    for (size_t i = 0; i < n; i++) {
        size_t end = cut_index(cut, ncut, (uint32_t)p->r[i].hi + 1);
        for (size_t j = next_free(next, cut_index(cut, ncut, p->r[i].lo)); j < end;
             j = next_free(next, j)) {
            seg_tag[j] = p->r[i].tag;
            next[j] = j + 1;
        }
    }
    size_t nout = 0;
    for (size_t j = 0; j + 1 < ncut; j++) {
        if (next[j] == j) /* unpainted: a gap between ranges */
            continue;
        uint16_t lo = (uint16_t)cut[j], hi = (uint16_t)(cut[j + 1] - 1);
        if (nout > 0 && out[nout - 1].tag == seg_tag[j] && out[nout - 1].hi + 1u == lo)
            out[nout - 1].hi = hi;
        else
            out[nout++] = (struct run){lo, hi, seg_tag[j]};
    }
    free(cut);
    free(next);
    free(seg_tag);
    free(p->r);
    p->r = out; /* room for 2n runs: at most twice what is used */
    p->n = nout;
    p->cap = 2 * n;
    p->built = 1;
    return 0;
fail:
    free(cut);
    free(next);
    free(seg_tag);
    free(out);
    p->built = -1; /* like the other sets: only _free is left */
    return -1;
}

int
rules_ports_match(const struct rules_ports *p, uint16_t port, uint32_t *tag)
{
    if (p == NULL || p->built != 1 || p->n == 0)
        return 0;
    size_t base = 0, n = p->n;
    while (n > 1) {
        size_t half = n / 2;
        base = p->r[base + half].lo <= port ? base + half : base;
        n -= half;
    }
    const struct run *r = &p->r[base];
    if (port < r->lo || port > r->hi)
        return 0;
    if (tag != NULL)
        *tag = r->tag;
    return 1;
}
