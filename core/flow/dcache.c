#include <stdlib.h>
#include <string.h>

#include "flow/dcache.h"
#include "log/log.h"

/* Names longer than this are not cached: keeps an entry near 150 bytes. */
#define NAME_INLINE 55

struct key {
    uint8_t network, inbound, kind, name_len;
    uint16_t port;
    uint8_t ip[16];
    char name[NAME_INLINE + 1];
};

struct entry {
    struct key k;
    uint32_t hash;
    int policy;
    char why[sizeof(((struct flow *)0)->why)]; /* the rule-list line, shown on hits too */
    uint32_t next;        /* hash chain: an index into e[], 0 ends it */
    uint32_t lru_prev, lru_next;
};

struct flow_dcache {
    struct entry *e;      /* capacity + 1: e[0] is the LRU sentinel */
    uint32_t *buckets;    /* an index into e[], 0 empty (e[0] is never chained) */
    size_t capacity, size, mask;
    struct flow_dcache_stats st;
};

static int
make_key(struct key *k, const struct flow *f)
{
    memset(k, 0, sizeof(*k));
    k->network = (uint8_t)f->network;
    k->inbound = (uint8_t)f->inbound;
    k->kind = (uint8_t)f->dst.kind;
    k->port = f->dst.port;
    if (f->dst.kind == FLOW_ADDR_NAME) {
        if (f->dst.name_len > NAME_INLINE)
            return -1;
        k->name_len = f->dst.name_len;
        memcpy(k->name, f->dst.name, f->dst.name_len);
    } else {
        memcpy(k->ip, f->dst.ip, 16);
    }
    return 0;
}

/* FNV-1a over the key: short keys, no attacker-chosen hash flooding worth
 * a keyed hash (a flood only evicts, it cannot grow the table). */
static uint32_t
hash_key(const struct key *k)
{
    const uint8_t *p = (const uint8_t *)k;
    size_t n = offsetof(struct key, name) + k->name_len;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static int
key_eq(const struct key *a, const struct key *b)
{
    return memcmp(a, b, offsetof(struct key, name) + a->name_len) == 0;
}

struct flow_dcache *
flow_dcache_new(size_t capacity)
{
    struct flow_dcache *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    size_t nb = 16;
    while (nb < capacity * 2)
        nb <<= 1;
    c->capacity = capacity;
    c->mask = nb - 1;
    c->e = calloc(capacity + 1, sizeof(*c->e));
    c->buckets = calloc(nb, sizeof(*c->buckets));
    if (c->e == NULL || c->buckets == NULL) {
        flow_dcache_free(c);
        return NULL;
    }
    c->st.capacity = capacity;
    return c;
}

void
flow_dcache_free(struct flow_dcache *c)
{
    if (c == NULL)
        return;
    free(c->e);
    free(c->buckets);
    free(c);
}

static void
lru_unlink(struct flow_dcache *c, uint32_t i)
{
    c->e[c->e[i].lru_prev].lru_next = c->e[i].lru_next;
    c->e[c->e[i].lru_next].lru_prev = c->e[i].lru_prev;
}

static void
lru_front(struct flow_dcache *c, uint32_t i)
{
    c->e[i].lru_next = c->e[0].lru_next;
    c->e[i].lru_prev = 0;
    c->e[c->e[0].lru_next].lru_prev = i;
    c->e[0].lru_next = i;
}

static uint32_t
find(const struct flow_dcache *c, const struct key *k, uint32_t h)
{
    for (uint32_t i = c->buckets[h & c->mask]; i != 0; i = c->e[i].next)
        if (c->e[i].hash == h && key_eq(&c->e[i].k, k))
            return i;
    return 0;
}

int
flow_dcache_get(struct flow_dcache *c, struct flow *f)
{
    struct key k;
    if (c->size == 0 || make_key(&k, f) != 0) {
        c->st.misses++;
        return 0;
    }
    uint32_t h = hash_key(&k), i = find(c, &k, h);
    if (i == 0) {
        c->st.misses++;
        return 0;
    }
    lru_unlink(c, i);
    lru_front(c, i);
    f->policy = c->e[i].policy;
    f->rule = "route (cached)";
    memcpy(f->why, c->e[i].why, sizeof(f->why));
    c->st.hits++;
    LOG_DEBUG("flow %llu: decision cache hit (entry %u of %zu): route() not called",
              (unsigned long long)f->id, (unsigned)i, c->size);
    return 1;
}

static void
chain_remove(struct flow_dcache *c, uint32_t i)
{
    uint32_t *pp = &c->buckets[c->e[i].hash & c->mask];
    while (*pp != 0 && *pp != i)
        pp = &c->e[*pp].next;
    if (*pp == i)
        *pp = c->e[i].next;
}

void
flow_dcache_put(struct flow_dcache *c, const struct flow *f)
{
    struct key k;
    if (c->capacity == 0 || make_key(&k, f) != 0)
        return;
    uint32_t h = hash_key(&k), i = find(c, &k, h);
    if (i != 0) {
        c->e[i].policy = f->policy;
        memcpy(c->e[i].why, f->why, sizeof(f->why));
        return;
    }
    if (c->size < c->capacity) {
        i = (uint32_t)++c->size;
        if (c->size == 1)
            c->e[0].lru_next = c->e[0].lru_prev = 0;
    } else {
        i = c->e[0].lru_prev; /* the least recently used */
        chain_remove(c, i);
        lru_unlink(c, i);
        c->st.evictions++;
    }
    c->e[i].k = k;
    c->e[i].hash = h;
    c->e[i].policy = f->policy;
    memcpy(c->e[i].why, f->why, sizeof(f->why));
    c->e[i].next = c->buckets[h & c->mask];
    c->buckets[h & c->mask] = i;
    lru_front(c, i);
    c->st.inserts++;
}

void
flow_dcache_clear(struct flow_dcache *c)
{
    memset(c->buckets, 0, (c->mask + 1) * sizeof(*c->buckets));
    c->size = 0;
}

void
flow_dcache_stats(const struct flow_dcache *c, struct flow_dcache_stats *out)
{
    *out = c->st;
    out->size = c->size;
}

const struct log_counter flow_dcache_counters[] = {
#define X(field, key) LOG_COUNTER(struct flow_dcache_stats, field, key)
    FLOW_DCACHE_STATS(X)
#undef X
    LOG_COUNTER_END};
