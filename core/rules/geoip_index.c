/* An mmdb search tree flattened into sorted address intervals (geoip_int.h
 * has the contract). A cache-cold GEOIP lookup by the tree is one
 * dependent load per remaining bit, each in a different cache line and
 * often a different page of a file of several MiB: a 20-bit start table
 * and the walk below it measured 300-400 ns per new flow inside route(),
 * where nothing overlaps the misses (and a /16 bucket table, then the
 * bucket's intervals, still 2 misses: ~400 ns on a loaded machine). Here
 * an IPv4 lookup reads one cache line: the /16's own line (4 MiB of them,
 * 2^16 x 64 bytes) holds up to 15 intervals, each a 16-bit start and a
 * 16-bit value id, compared all at once; the ids' values are a small table
 * that stays cached (a country file has a few hundred). A /16 with more
 * intervals points to a sorted run of them, searched. IPv6 probes a /16
 * bucket table, then searches that bucket's intervals. All of it sits in
 * memory advised into huge pages, so that the probes do not miss the TLB.
 *
 * The intervals come from one depth-first pass over the tree, the left
 * branch first, so they come in address order; neighbours that lead to the
 * same data merge. IPv4 keys are the 32 bits of the address, IPv6 keys the
 * top 64 (countries are never assigned past a /64 in practice; a subtree
 * that goes deeper is left to the walk). A node reached a second time
 * (the IPv4 subtree aliased at ::ffff:0:0/96 and 2002::/16 in MaxMind's
 * files, or a crafted file) is not expanded again: its addresses walk the
 * tree from it. So the pass visits each node once, whatever the file. */

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rules/geoip_int.h"

#define BUCKETS 65536u
#define ESC 0x80000000u /* a value that names an escape, not data */

size_t rules_geoip_index_limit;

#define INLINE 15 /* intervals a /16's line holds */

/* A /16 of IPv4; intervals start at its own address (lo[0] == 0). */
struct line4 {
    uint16_t n;          /* intervals */
    uint16_t lo[INLINE]; /* n <= INLINE: their starts' low 16 bits */
    uint16_t id[INLINE]; /* and value ids; n > INLINE: id[0] | id[1] << 16 is where the
                          * run starts in ov_lo and ov_id */
    uint16_t pad;
};

struct iv6 {
    uint64_t lo; /* the low 48 bits of the start's top 64 */
    uint32_t id;
    uint32_t pad;
};

struct esc {
    uint32_t node, depth;
};

struct geoip_index {
    struct line4 *l4;         /* BUCKETS */
    uint16_t *ov_lo, *ov_id;  /* the runs of the /16s with more than INLINE */
    uint32_t *vals;           /* id -> value */
    size_t nvals;
    size_t esc_ids;           /* escapes: 0 means no id needs vals[] checked */
    uint32_t *at6;            /* BUCKETS + 1: bucket b holds [at6[b], at6[b + 1]) */
    struct iv6 *iv6;
    struct esc *esc;
    void *block;
    size_t block_len, mapped; /* mapped: 0 when block came from malloc */
};

/* One family's pass: intervals cut at every bucket's start. */
struct pass {
    const struct geoip_tree *t;
    int width, shift;
    uint64_t mask;
    uint32_t *at;
    uint64_t *lo;
    uint32_t *val;
    size_t n, cap, max;
    long bucket;
    uint32_t last;
    struct esc **esc;
    size_t *nesc, *esc_cap;
    uint8_t *seen;
    int failed;
};

static int
push(struct pass *p, uint64_t lo, uint32_t val)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 4096;
        if (p->n >= p->max) {
            p->failed = 1;
            return -1;
        }
        uint64_t *l = realloc(p->lo, cap * sizeof(*l));
        if (l != NULL)
            p->lo = l;
        uint32_t *v = l != NULL ? realloc(p->val, cap * sizeof(*v)) : NULL;
        if (v == NULL) {
            p->failed = 1;
            return -1;
        }
        p->val = v;
        p->cap = cap;
    }
    p->lo[p->n] = lo;
    p->val[p->n++] = val;
    return 0;
}

/* The interval from |start| (in address order) leads to |val|. */
static void
emit(struct pass *p, uint64_t start, uint32_t val)
{
    if (p->n > 0 && val == p->last && !(val & ESC))
        return;
    long bucket = (long)(start >> p->shift);
    while (p->bucket < bucket) {
        p->at[++p->bucket] = (uint32_t)p->n;
        if (p->bucket < bucket || (start & p->mask) != 0)
            push(p, 0, p->last); /* the interval in force at the bucket's start */
    }
    push(p, start & p->mask, val);
    p->last = val;
}

static uint32_t
escape(struct pass *p, uint32_t node, int depth)
{
    if (*p->nesc == *p->esc_cap) {
        size_t cap = *p->esc_cap ? *p->esc_cap * 2 : 64;
        struct esc *e = cap < ESC ? realloc(*p->esc, cap * sizeof(*e)) : NULL;
        if (e == NULL) {
            p->failed = 1;
            return 0;
        }
        *p->esc = e;
        *p->esc_cap = cap;
    }
    (*p->esc)[*p->nesc] = (struct esc){node, (uint32_t)depth};
    return ESC | (uint32_t)(*p->nesc)++;
}

static void
flatten(struct pass *p, uint32_t start)
{
    const struct geoip_tree *t = p->t;
    struct {
        uint32_t r;
        int depth;
        uint64_t prefix;
    } st[64 + 2]; /* one right branch waits per level */
    int sp = 0;
    st[sp].r = start;
    st[sp].depth = 0;
    st[sp++].prefix = 0;
    while (sp > 0 && !p->failed) {
        sp--;
        uint32_t r = st[sp].r;
        int d = st[sp].depth;
        uint64_t prefix = st[sp].prefix;
        if (r >= t->nodes) {
            emit(p, prefix, geoip_leaf(t, r));
            continue;
        }
        if (d == p->width || (p->seen[r >> 3] & (1u << (r & 7)))) {
            uint32_t v = escape(p, r, d);
            if (!p->failed)
                emit(p, prefix, v);
            continue;
        }
        p->seen[r >> 3] |= (uint8_t)(1u << (r & 7));
        /* Both children's nodes start loading now: the right one is read
         * after the whole left subtree, the left one at once (a file's
         * nodes are not in this order: each read is a cache miss). */
        uint32_t right = geoip_record_at(t, r, 1), left = geoip_record_at(t, r, 0);
        if (right < t->nodes)
            __builtin_prefetch(t->tree + (size_t)right * t->bits / 4);
        if (left < t->nodes)
            __builtin_prefetch(t->tree + (size_t)left * t->bits / 4);
        st[sp].r = right;
        st[sp].depth = d + 1;
        st[sp++].prefix = prefix | (uint64_t)1 << (p->width - d - 1);
        st[sp].r = left;
        st[sp].depth = d + 1;
        st[sp++].prefix = prefix;
    }
    while (!p->failed && p->bucket < (long)BUCKETS - 1) {
        p->at[++p->bucket] = (uint32_t)p->n;
        push(p, 0, p->last);
    }
    p->at[BUCKETS] = (uint32_t)p->n;
}

/* |len| bytes, 2 MiB-aligned and advised into huge pages when that big. */
static void *
block_alloc(size_t len, size_t *mapped)
{
    const size_t huge = (size_t)2 << 20;
    *mapped = 0;
    if (len < huge / 2)
        return malloc(len);
    size_t want = (len + huge - 1) & ~(huge - 1);
    uint8_t *p = mmap(NULL, want + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (p + want + huge > a + want)
        munmap(a + want, (size_t)(p + want + huge - (a + want)));
#ifdef MADV_HUGEPAGE
    madvise(a, want, MADV_HUGEPAGE); /* a hint: without it, 4 KiB pages */
#endif
    *mapped = want;
    return a;
}

void
geoip_index_free(struct geoip_index *ix)
{
    if (ix == NULL)
        return;
    if (ix->mapped)
        munmap(ix->block, ix->mapped);
    else
        free(ix->block);
    free(ix);
}

size_t
geoip_index_bytes(const struct geoip_index *ix)
{
    return ix->block_len;
}

/* Value ids: the distinct values of the IPv4 intervals, by open hashing. */
#define IDS_MAX 65536
#define IDS_SLOTS (1u << 17)

struct ids {
    uint32_t *key; /* value + 1; 0 empty */
    uint16_t *id;
    uint32_t *vals;
    size_t n;
};

static int
id_of(struct ids *m, uint32_t val)
{
    uint32_t h = ((val + 1) * 2654435761u) >> 15;
    for (;; h = (h + 1) & (IDS_SLOTS - 1)) {
        if (m->key[h] == val + 1)
            return m->id[h];
        if (m->key[h] == 0)
            break;
    }
    if (m->n == IDS_MAX)
        return -1;
    m->key[h] = val + 1;
    m->id[h] = (uint16_t)m->n;
    m->vals[m->n] = val;
    return (int)m->n++;
}

/* The IPv4 pass (its values ids) into lines and runs: -1 for a /16 of
 * 2^16 intervals. */
static int
pack4(struct geoip_index *ix, const struct pass *p)
{
    size_t nov = 0;
    for (uint32_t b = 0; b < BUCKETS; b++) {
        struct line4 *l = &ix->l4[b];
        uint32_t from = p->at[b], n = p->at[b + 1] - from;
        if (n > 0xffff) /* every address of the /16 its own interval: a crafted file */
            return -1;
        l->n = (uint16_t)n;
        uint16_t *lo = n <= INLINE ? l->lo : ix->ov_lo + nov, *id = n <= INLINE ? l->id : ix->ov_id + nov;
        if (n > INLINE) {
            l->id[0] = (uint16_t)nov;
            l->id[1] = (uint16_t)(nov >> 16);
            nov += n;
        }
        for (uint32_t i = 0; i < n; i++) {
            lo[i] = (uint16_t)p->lo[from + i];
            id[i] = (uint16_t)p->val[from + i];
        }
    }
    return 0;
}

/* Replaces each of |p|'s values by its id: -1 past IDS_MAX distinct ones
 * (an ASN or City file: the caller walks the tree). */
static int
to_ids(struct pass *p, struct ids *m)
{
    for (size_t i = 0; i < p->n; i++) {
        int id = id_of(m, p->val[i]);
        if (id < 0)
            return -1;
        p->val[i] = (uint32_t)id;
    }
    return 0;
}

struct geoip_index *
geoip_index_build(const struct geoip_tree *t, uint32_t v4_start, int v6, size_t max_bytes)
{
    if (t->data_size >= ESC - 1)
        return NULL; /* offsets + 1 must stay below ESC */
    struct geoip_index *ix = calloc(1, sizeof(*ix));
    uint32_t *at = calloc(2 * (BUCKETS + 1), sizeof(*at));
    uint8_t *seen = calloc((size_t)t->nodes / 8 + 1, 1);
    struct esc *esc = NULL;
    size_t nesc = 0, esc_cap = 0;
    size_t max = max_bytes / 4;
    struct ids m = {calloc(IDS_SLOTS, sizeof(uint32_t)), calloc(IDS_SLOTS, sizeof(uint16_t)),
                    malloc(IDS_MAX * sizeof(uint32_t)), 0};
    struct pass p4 = {.t = t, .width = 32, .shift = 16, .mask = 0xffff, .at = at, .max = max,
                      .bucket = -1, .esc = &esc, .nesc = &nesc, .esc_cap = &esc_cap,
                      .seen = seen};
    struct pass p6 = {.t = t, .width = 64, .shift = 48, .mask = ((uint64_t)1 << 48) - 1,
                      .at = at + BUCKETS + 1, .max = max / 4, .bucket = -1, .esc = &esc,
                      .nesc = &nesc, .esc_cap = &esc_cap, .seen = seen};
    struct geoip_index *ret = NULL;
    if (ix == NULL || at == NULL || seen == NULL || m.key == NULL || m.id == NULL || m.vals == NULL)
        goto done;
    flatten(&p4, v4_start); /* first, so that IPv6's aliases of it stay escapes */
    if (v6 && !p4.failed)
        flatten(&p6, 0);
    if (p4.failed || p6.failed || to_ids(&p4, &m) != 0 || (v6 && to_ids(&p6, &m) != 0))
        goto done;
    size_t nov = 0, n6 = v6 ? p6.n : 0;
    for (uint32_t b = 0; b < BUCKETS; b++)
        if (at[b + 1] - at[b] > INLINE)
            nov += at[b + 1] - at[b];
    /* The largest alignment first; ids come last, once counted. */
    size_t len = BUCKETS * sizeof(struct line4) + n6 * sizeof(struct iv6) +
                 (v6 ? (BUCKETS + 1) * sizeof(uint32_t) : 0) + nesc * sizeof(struct esc) +
                 m.n * sizeof(uint32_t) + 2 * nov * sizeof(uint16_t);
    if (len > max_bytes)
        goto done;
    uint8_t *b = block_alloc(len, &ix->mapped);
    if (b == NULL)
        goto done;
    ix->block = b;
    ix->block_len = len;
    ix->l4 = (struct line4 *)b;
    b += BUCKETS * sizeof(struct line4);
    ix->iv6 = (struct iv6 *)b;
    b += n6 * sizeof(struct iv6);
    if (v6) {
        ix->at6 = (uint32_t *)b;
        memcpy(ix->at6, at + BUCKETS + 1, (BUCKETS + 1) * sizeof(uint32_t));
        b += (BUCKETS + 1) * sizeof(uint32_t);
    }
    ix->esc = (struct esc *)b;
    b += nesc * sizeof(struct esc);
    ix->vals = (uint32_t *)b;
    b += m.n * sizeof(uint32_t);
    ix->ov_lo = (uint16_t *)b;
    ix->ov_id = ix->ov_lo + nov;
    if (pack4(ix, &p4) != 0)
        goto done;
    for (size_t i = 0; i < n6; i++)
        ix->iv6[i] = (struct iv6){p6.lo[i], p6.val[i], 0};
    ix->nvals = m.n;
    if (nesc > 0)
        memcpy(ix->esc, esc, nesc * sizeof(*esc));
    memcpy(ix->vals, m.vals, m.n * sizeof(uint32_t));
    ix->esc_ids = nesc;
    ret = ix;
    ix = NULL;
done:
    geoip_index_free(ix);
    free(at);
    free(seen);
    free(esc);
    free(m.key);
    free(m.id);
    free(m.vals);
    free(p4.lo);
    free(p4.val);
    free(p6.lo);
    free(p6.val);
    return ret;
}

uint32_t
geoip_walk(const struct geoip_tree *t, uint32_t node, const uint8_t *addr, int i, int nbits)
{
    const uint8_t *tree = t->tree, *p;
    const uint32_t n = t->nodes;
#define BIT(i) (addr[(i) >> 3] >> (7 - ((i) & 7)) & 1)
    switch (t->bits) { /* one loop per record size: the step is a load and a shift */
    case 24:
        for (; i < nbits && node < n; i++) {
            p = tree + (size_t)node * 6 + BIT(i) * 3;
            node = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
        }
        return node;
    case 28:
        for (; i < nbits && node < n; i++)
            node = geoip_record_at(t, node, BIT(i));
        return node;
    default:
        for (; i < nbits && node < n; i++) {
            p = tree + (size_t)node * 8 + BIT(i) * 4;
            node = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        }
        return node;
    }
#undef BIT
}

size_t
geoip_index_ids(const struct geoip_index *ix)
{
    return ix->nvals;
}

uint32_t
geoip_index_find(const struct geoip_index *ix, const struct geoip_tree *t, int v6,
                 const uint8_t *addr, uint32_t *off)
{
    uint32_t id;
    if (!v6) {
        uint32_t x = (uint32_t)addr[0] << 24 | (uint32_t)addr[1] << 16 | (uint32_t)addr[2] << 8 |
                     addr[3];
        const struct line4 *l = &ix->l4[x >> 16];
        uint16_t key = (uint16_t)x;
        uint32_t n = l->n;
        if (n <= INLINE) { /* the last interval starting at or below key; lo[0] == 0 */
            unsigned c = 0;
            for (unsigned i = 1; i < INLINE; i++)
                c += (i < n) & (l->lo[i] <= key);
            id = l->id[c];
        } else {
            uint32_t at = l->id[0] | (uint32_t)l->id[1] << 16;
            const uint16_t *lo = ix->ov_lo + at, *base = lo;
            while (n > 1) {
                uint32_t half = n / 2;
                base = base[half] <= key ? base + half : base;
                n -= half;
            }
            id = ix->ov_id[at + (uint32_t)(base - lo)];
        }
    } else {
        uint64_t x = 0;
        for (int i = 0; i < 8; i++)
            x = x << 8 | addr[i];
        const uint32_t *at = ix->at6 + (x >> 48);
        const struct iv6 *base = ix->iv6 + at[0];
        uint32_t n = at[1] - at[0];
        uint64_t key = x & (((uint64_t)1 << 48) - 1);
        while (n > 1) {
            uint32_t half = n / 2;
            base = base[half].lo <= key ? base + half : base;
            n -= half;
        }
        id = base->id;
    }
    /* Escapes are rare (aliases, deep subtrees): their values are only
     * read here, so a common id costs no load of vals. */
    if (!(ix->esc_ids > 0 && (ix->vals[id] & ESC)))
        return id;
    const struct esc *e = &ix->esc[ix->vals[id] & ~ESC];
    uint32_t r = geoip_walk(t, e->node, addr, (int)e->depth, v6 ? 128 : 32);
    /* still in the tree: deeper than the address, a corrupt file */
    *off = r >= t->nodes ? geoip_leaf(t, r) : 0;
    return GEOIP_NO_ID;
}

void
geoip_index_prefetch(const struct geoip_index *ix, int v6, const uint8_t *addr)
{
    if (!v6)
        __builtin_prefetch(&ix->l4[(uint32_t)addr[0] << 8 | addr[1]]);
    else
        __builtin_prefetch(&ix->at6[(uint32_t)addr[0] << 8 | addr[1]]);
}

uint32_t
geoip_index_value(const struct geoip_index *ix, uint32_t id)
{
    return ix->vals[id];
}
