#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rules/rules.h"

typedef __uint128_t u128;

#define U128_MAX (~(u128)0)

/* An address range [lo, hi] with a tag: a prefix while adding, a piece of
 * the flattened set after _build. */
struct range {
    u128 lo, hi;
    uint32_t tag;
};

/* Built, each family is a sorted array of disjoint intervals in three
 * columns (one allocation each family): the binary search touches only
 * |lo|, then one |hi| and |tag|. Addresses between intervals match
 * nothing. */
struct rules_cidrs {
    struct range *pend[2]; /* [0] IPv4, [1] IPv6, until _build */
    size_t npend[2], cap[2];
    size_t count;
    int built;
    uint32_t *lo4, *hi4, *tag4;
    size_t n4;
    u128 *lo6, *hi6;
    uint32_t *tag6;
    size_t n6;
};

static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static u128
load(const uint8_t *a, int n)
{
    u128 v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | a[i];
    return v;
}

struct rules_cidrs *
rules_cidrs_new(void)
{
    return calloc(1, sizeof(struct rules_cidrs));
}

void
rules_cidrs_free(struct rules_cidrs *c)
{
    if (c == NULL)
        return;
    free(c->pend[0]);
    free(c->pend[1]);
    free(c->lo4);
    free(c->lo6);
    free(c);
}

int
rules_cidrs_add(struct rules_cidrs *c, int family, const uint8_t *addr, unsigned prefix,
                uint32_t tag)
{
    if (c == NULL || c->built || addr == NULL)
        return -1;
    int bits;
    if (family == AF_INET)
        bits = 32;
    else if (family == AF_INET6)
        bits = 128;
    else
        return -1;
    if (prefix > (unsigned)bits)
        return -1;
    /* ::ffff:a.b.c.d/96+n is a.b.c.d/n: mapped addresses are looked up in
     * the IPv4 table, so that is where such a prefix must live. */
    if (bits == 128 && prefix >= 96 && memcmp(addr, v4_mapped, 12) == 0) {
        addr += 12;
        prefix -= 96;
        bits = 32;
    }
    int f = bits == 128;
    u128 v = load(addr, bits / 8);
    /* Host bits beyond the prefix are dropped; the range is computed in the
     * family's width so an IPv4 /0 ends at 255.255.255.255. */
    u128 span = prefix == (unsigned)bits ? 0 : (U128_MAX >> (128 - bits + prefix));
    if (c->npend[f] == c->cap[f]) {
        size_t n = c->cap[f] ? c->cap[f] * 2 : 16;
        struct range *p = realloc(c->pend[f], n * sizeof(*p));
        if (p == NULL)
            return -1;
        c->pend[f] = p;
        c->cap[f] = n;
    }
    c->pend[f][c->npend[f]++] = (struct range){v & ~span, (v & ~span) | span, tag};
    c->count++;
    return 0;
}

/* Starts first, then the wider of two prefixes that start together, then
 * the smaller tag: an enclosing prefix always comes before what it holds. */
static int
by_start(const void *x, const void *y)
{
    const struct range *a = x, *b = y;
    if (a->lo != b->lo)
        return a->lo < b->lo ? -1 : 1;
    if (a->hi != b->hi)
        return a->hi > b->hi ? -1 : 1;
    return a->tag < b->tag ? -1 : a->tag > b->tag;
}

static void
emit(struct range *out, size_t *n, u128 lo, u128 hi, uint32_t tag)
{
    if (*n > 0 && out[*n - 1].tag == tag && out[*n - 1].hi + 1 == lo)
        out[*n - 1].hi = hi;
    else
        out[(*n)++] = (struct range){lo, hi, tag};
}

/* Two prefixes are either disjoint or one holds the other, so a sweep in
 * start order keeps the prefixes around the current address on a stack,
 * each knowing the smallest tag from itself to the outermost. Every
 * address between two events gets the top's tag: smallest, not longest,
 * wins. Duplicates were removed, so the stack is at most 129 deep. */
static size_t
flatten(const struct range *p, size_t n, struct range *out)
{
    struct {
        u128 hi;
        uint32_t min;
    } st[130];
    int depth = 0, done = 0; /* done: |cur| went past the last address */
    size_t nout = 0;
    u128 cur = 0;
    for (size_t i = 0; i <= n; i++) {
        while (depth > 0 && (i == n || st[depth - 1].hi < p[i].lo)) {
            depth--;
            if (!done && cur <= st[depth].hi)
                emit(out, &nout, cur, st[depth].hi, st[depth].min);
            if (st[depth].hi == U128_MAX)
                done = 1;
            else if (!done && cur <= st[depth].hi)
                cur = st[depth].hi + 1;
        }
        if (i == n)
            break;
        if (depth > 0 && cur < p[i].lo)
            emit(out, &nout, cur, p[i].lo - 1, st[depth - 1].min);
        cur = p[i].lo;
        uint32_t min = p[i].tag;
        if (depth > 0 && st[depth - 1].min < min)
            min = st[depth - 1].min;
        st[depth].hi = p[i].hi;
        st[depth++].min = min;
    }
    return nout;
}

/* Sorts and dedupes the family's prefixes, then flattens them into a new
 * array. */
static int
build_family(struct rules_cidrs *c, int f, struct range **res, size_t *nres)
{
    struct range *p = c->pend[f];
    size_t n = c->npend[f], k = 0;
    *res = NULL;
    *nres = 0;
    if (n == 0)
        return 0;
    qsort(p, n, sizeof(*p), by_start);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || p[i].lo != p[k - 1].lo || p[i].hi != p[k - 1].hi)
            p[k++] = p[i];
    /* Each prefix opens at most one interval and its end resumes at most
     * one more. */
    struct range *out = malloc((2 * k + 1) * sizeof(*out));
    if (out == NULL)
        return -1;
    *nres = flatten(p, k, out);
    *res = out;
    return 0;
}

int
rules_cidrs_build(struct rules_cidrs *c)
{
    struct range *r4 = NULL, *r6 = NULL;
    size_t n4, n6;
    if (c == NULL || c->built)
        return -1;
    /* A failed build leaves the set for _free only: built is -1. */
    c->built = -1;
    if (build_family(c, 0, &r4, &n4) < 0 || build_family(c, 1, &r6, &n6) < 0)
        goto done;
    /* One element more than needed: malloc(0) may give NULL. */
    c->lo4 = malloc((n4 + 1) * 3 * sizeof(uint32_t));
    c->lo6 = malloc((n6 + 1) * (2 * sizeof(u128) + sizeof(uint32_t)));
    if (c->lo4 == NULL || c->lo6 == NULL)
        goto done;
    c->hi4 = c->lo4 + n4 + 1;
    c->tag4 = c->hi4 + n4 + 1;
    c->hi6 = c->lo6 + n6 + 1;
    c->tag6 = (uint32_t *)(c->hi6 + n6 + 1);
    for (size_t i = 0; i < n4; i++) {
        c->lo4[i] = (uint32_t)r4[i].lo;
        c->hi4[i] = (uint32_t)r4[i].hi;
        c->tag4[i] = r4[i].tag;
    }
    for (size_t i = 0; i < n6; i++) {
        c->lo6[i] = r6[i].lo;
        c->hi6[i] = r6[i].hi;
        c->tag6[i] = r6[i].tag;
    }
    c->n4 = n4;
    c->n6 = n6;
    for (int f = 0; f < 2; f++) {
        free(c->pend[f]);
        c->pend[f] = NULL;
        c->npend[f] = c->cap[f] = 0;
    }
    c->built = 1;
done:
    free(r4);
    free(r6);
    return c->built == 1 ? 0 : -1;
}

/* The last interval starting at or before |a| (n > 0), branch-free: the
 * loop runs log2(n) times whatever the data, and the step compiles to a
 * conditional move. */
static size_t
find4(const uint32_t *lo, size_t n, uint32_t a)
{
    size_t base = 0;
    while (n > 1) {
        size_t half = n / 2;
        base = lo[base + half] <= a ? base + half : base;
        n -= half;
    }
    return base;
}

static size_t
find6(const u128 *lo, size_t n, u128 a)
{
    size_t base = 0;
    while (n > 1) {
        size_t half = n / 2;
        base = lo[base + half] <= a ? base + half : base;
        n -= half;
    }
    return base;
}

int
rules_cidrs_match(const struct rules_cidrs *c, int family, const uint8_t *addr, uint32_t *tag)
{
    size_t i;
    if (c == NULL || c->built != 1 || addr == NULL)
        return 0;
    if (family == AF_INET6 && memcmp(addr, v4_mapped, 12) == 0) {
        family = AF_INET;
        addr += 12;
    }
    if (family == AF_INET) {
        uint32_t a = (uint32_t)load(addr, 4);
        if (c->n4 == 0)
            return 0;
        i = find4(c->lo4, c->n4, a);
        if (a < c->lo4[i] || a > c->hi4[i])
            return 0;
        if (tag != NULL)
            *tag = c->tag4[i];
        return 1;
    }
    if (family == AF_INET6) {
        u128 a = load(addr, 16);
        if (c->n6 == 0)
            return 0;
        i = find6(c->lo6, c->n6, a);
        if (a < c->lo6[i] || a > c->hi6[i])
            return 0;
        if (tag != NULL)
            *tag = c->tag6[i];
        return 1;
    }
    return 0;
}

size_t
rules_cidrs_count(const struct rules_cidrs *c)
{
    return c ? c->count : 0;
}

size_t
rules_cidrs_memory(const struct rules_cidrs *c)
{
    if (c == NULL)
        return 0;
    size_t n = sizeof(*c) + (c->cap[0] + c->cap[1]) * sizeof(struct range);
    if (c->built == 1)
        n += (c->n4 + 1) * 3 * sizeof(uint32_t) +
             (c->n6 + 1) * (2 * sizeof(u128) + sizeof(uint32_t));
    return n;
}
