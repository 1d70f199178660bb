#include <stdlib.h>
#include <string.h>

#include "dns/revmap.h"

#define NIL UINT32_MAX

/* An interned name: one allocation, shared by every address that maps to
 * it (a CDN name often has a dozen). */
struct name {
    struct name *hnext;
    uint32_t refs, hash;
    char s[];
};

/* Entries sit in one array and link by index: 40 bytes each, no
 * per-entry allocation. */
struct entry {
    uint8_t ip[16];
    uint8_t version;
    struct name *name;
    uint32_t prev, next; /* LRU list, most recent at |head| */
    uint32_t hnext;      /* bucket chain */
};

struct dns_revmap {
    size_t cap, n, ecap;
    struct entry *e;
    uint32_t *bucket;    /* |nbucket| heads, a power of two >= |ecap| */
    size_t nbucket;
    uint32_t head, tail;
    struct name **nbuck; /* interned names */
    size_t nnbucket, nnames;
};

static uint32_t
fnv(const uint8_t *p, size_t n, uint32_t h)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static uint32_t
ip_hash(const uint8_t *ip, int version)
{
    return fnv(ip, version == 4 ? 4 : 16, 2166136261u ^ (uint32_t)version);
}

struct dns_revmap *
dns_revmap_new(size_t cap)
{
    if (cap == 0 || cap >= NIL)
        return NULL;
    struct dns_revmap *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    m->cap = cap;
    m->head = m->tail = NIL;
    return m;
}

void
dns_revmap_free(struct dns_revmap *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->nnbucket; i++) {
        for (struct name *nm = m->nbuck[i], *next; nm != NULL; nm = next) {
            next = nm->hnext;
            free(nm);
        }
    }
    free(m->nbuck);
    free(m->bucket);
    free(m->e);
    free(m);
}

size_t
dns_revmap_count(const struct dns_revmap *m)
{
    return m->n;
}

static struct name *
name_ref(struct dns_revmap *m, const char *s)
{
    size_t len = strlen(s);
    uint32_t h = fnv((const uint8_t *)s, len, 2166136261u);
    if (m->nnbucket > 0) {
        for (struct name *nm = m->nbuck[h & (m->nnbucket - 1)]; nm != NULL; nm = nm->hnext) {
            if (nm->hash == h && strcmp(nm->s, s) == 0) {
                nm->refs++;
                return nm;
            }
        }
    }
    if (m->nnames >= m->nnbucket) {
        size_t nb = m->nnbucket ? m->nnbucket * 2 : 64;
        struct name **b = calloc(nb, sizeof(*b));
        if (b == NULL)
            return NULL;
        for (size_t i = 0; i < m->nnbucket; i++) {
            for (struct name *nm = m->nbuck[i], *next; nm != NULL; nm = next) {
                next = nm->hnext;
                nm->hnext = b[nm->hash & (nb - 1)];
                b[nm->hash & (nb - 1)] = nm;
            }
        }
        free(m->nbuck);
        m->nbuck = b, m->nnbucket = nb;
    }
    struct name *nm = malloc(sizeof(*nm) + len + 1);
    if (nm == NULL)
        return NULL;
    nm->refs = 1;
    nm->hash = h;
    memcpy(nm->s, s, len + 1);
    struct name **slot = &m->nbuck[h & (m->nnbucket - 1)];
    nm->hnext = *slot;
    *slot = nm;
    m->nnames++;
    return nm;
}

static void
name_unref(struct dns_revmap *m, struct name *nm)
{
    if (--nm->refs > 0)
        return;
    struct name **pp = &m->nbuck[nm->hash & (m->nnbucket - 1)];
    while (*pp != nm)
        pp = &(*pp)->hnext;
    *pp = nm->hnext;
    m->nnames--;
    free(nm);
}

static void
lru_unlink(struct dns_revmap *m, uint32_t i)
{
    struct entry *e = &m->e[i];
    if (e->prev != NIL)
        m->e[e->prev].next = e->next;
    else
        m->head = e->next;
    if (e->next != NIL)
        m->e[e->next].prev = e->prev;
    else
        m->tail = e->prev;
}

static void
lru_push(struct dns_revmap *m, uint32_t i)
{
    m->e[i].prev = NIL;
    m->e[i].next = m->head;
    if (m->head != NIL)
        m->e[m->head].prev = i;
    m->head = i;
    if (m->tail == NIL)
        m->tail = i;
}

static uint32_t *
chain(struct dns_revmap *m, const uint8_t *ip, int version)
{
    return &m->bucket[ip_hash(ip, version) & (m->nbucket - 1)];
}

static uint32_t
find(struct dns_revmap *m, const uint8_t *ip, int version)
{
    if (m->nbucket == 0)
        return NIL;
    size_t len = version == 4 ? 4 : 16;
    for (uint32_t i = *chain(m, ip, version); i != NIL; i = m->e[i].hnext)
        if (m->e[i].version == version && memcmp(m->e[i].ip, ip, len) == 0)
            return i;
    return NIL;
}

/* Grows the entry array (and the buckets with it) by doubling up to |cap|. */
static int
grow(struct dns_revmap *m)
{
    size_t ecap = m->ecap ? m->ecap * 2 : 256;
    if (ecap > m->cap)
        ecap = m->cap;
    size_t nb = 1;
    while (nb < ecap)
        nb *= 2;
    struct entry *e = realloc(m->e, ecap * sizeof(*e));
    if (e == NULL)
        return -1;
    m->e = e, m->ecap = ecap;
    if (nb != m->nbucket) {
        uint32_t *b = malloc(nb * sizeof(*b));
        if (b == NULL)
            return -1;
        memset(b, 0xff, nb * sizeof(*b));
        free(m->bucket);
        m->bucket = b, m->nbucket = nb;
        for (uint32_t i = 0; i < m->n; i++) {
            uint32_t *c = chain(m, m->e[i].ip, m->e[i].version);
            m->e[i].hnext = *c;
            *c = i;
        }
    }
    return 0;
}

/* Frees the least recently used entry's slot for reuse. */
static uint32_t
evict(struct dns_revmap *m)
{
    uint32_t i = m->tail;
    struct entry *e = &m->e[i];
    uint32_t *pp = chain(m, e->ip, e->version);
    while (*pp != i)
        pp = &m->e[*pp].hnext;
    *pp = e->hnext;
    lru_unlink(m, i);
    name_unref(m, e->name);
    return i;
}

int
dns_revmap_put(struct dns_revmap *m, const uint8_t *ip, int version, const char *name)
{
    uint32_t i = find(m, ip, version);
    if (i != NIL) {
        lru_unlink(m, i);
        lru_push(m, i);
        if (strcmp(m->e[i].name->s, name) == 0)
            return 0;
        struct name *nm = name_ref(m, name);
        if (nm == NULL)
            return -1;
        name_unref(m, m->e[i].name);
        m->e[i].name = nm;
        return 0;
    }
    struct name *nm = name_ref(m, name);
    if (nm == NULL)
        return -1;
    if (m->n == m->ecap && m->n < m->cap && grow(m) != 0) {
        name_unref(m, nm);
        return -1;
    }
    if (m->n < m->ecap)
        i = (uint32_t)m->n++;
    else
        i = evict(m);
    struct entry *e = &m->e[i];
    memset(e->ip, 0, sizeof(e->ip));
    memcpy(e->ip, ip, version == 4 ? 4 : 16);
    e->version = (uint8_t)version;
    e->name = nm;
    uint32_t *c = chain(m, ip, version);
    e->hnext = *c;
    *c = i;
    lru_push(m, i);
    return 0;
}

const char *
dns_revmap_get(struct dns_revmap *m, const uint8_t *ip, int version)
{
    uint32_t i = find(m, ip, version);
    if (i == NIL)
        return NULL;
    lru_unlink(m, i);
    lru_push(m, i);
    return m->e[i].name->s;
}
