#include <stdlib.h>
#include <string.h>

#include "dns/cache.h"
#include "dns/msg.h"

/* Buckets beyond this make the table itself the memory problem; chains
 * grow instead. */
#define MAX_BUCKETS (1u << 22)

struct link {
    struct link *prev, *next;
};

/* One allocation: this header, the TTL field offsets, the response as
 * upstream sent it, then the key name. Aging reads the original TTLs from
 * the stored bytes, so nothing is re-parsed on a hit. */
struct entry {
    struct link lru; /* first: an entry is its LRU link */
    struct entry *hnext, **hpprev;
    uint32_t hash;
    uint16_t type, name_len, len, nttl;
    size_t size;
    double stored, expires;
    uint16_t ttl_off[];
};

struct dns_cache {
    struct entry **buckets;
    size_t mask, max;
    uint32_t min_ttl, max_ttl, neg_ttl;
    struct link lru; /* next: most recently used */
    struct dns_cache_stats st;
};

static inline uint8_t *
entry_msg(struct entry *e)
{
    return (uint8_t *)(e->ttl_off + e->nttl);
}

static inline char *
entry_name(struct entry *e)
{
    return (char *)entry_msg(e) + e->len;
}

static inline uint32_t
get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void
put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* The key is the name as the parser prints it: lower case, no final dot. */
static int
make_key(char *key, const char *name)
{
    size_t n = strlen(name);
    if (n > 1 && name[n - 1] == '.' && name[n - 2] != '\\')
        n--;
    else if (n == 1 && name[0] == '.')
        n = 0;
    if (n > DNS_NAME_MAX)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned b = (unsigned char)name[i];
        key[i] = (char)(b - 'A' < 26u ? b + 32 : b);
    }
    key[n] = '\0';
    return (int)n;
}

/* FNV-1a: a flood of names can only lengthen chains up to the entry
 * bound, since the table never grows past |max|. */
static uint32_t
hash_key(const char *key, size_t n, uint16_t type)
{
    uint32_t h = 2166136261u ^ type;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)key[i]) * 16777619u;
    return h;
}

struct dns_cache *
dns_cache_new(size_t max_entries, uint32_t min_ttl, uint32_t max_ttl, uint32_t neg_ttl)
{
    struct dns_cache *c = calloc(1, sizeof(*c));
    size_t nb = 16;

    if (c == NULL)
        return NULL;
    while (nb < max_entries && nb < MAX_BUCKETS)
        nb <<= 1;
    c->buckets = calloc(nb, sizeof(*c->buckets));
    if (c->buckets == NULL) {
        free(c);
        return NULL;
    }
    c->mask = nb - 1;
    c->max = max_entries;
    c->min_ttl = min_ttl;
    c->max_ttl = max_ttl;
    c->neg_ttl = neg_ttl;
    c->lru.prev = c->lru.next = &c->lru;
    return c;
}

static void
lru_unlink(struct link *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
}

static void
lru_front(struct dns_cache *c, struct link *l)
{
    l->prev = &c->lru;
    l->next = c->lru.next;
    c->lru.next->prev = l;
    c->lru.next = l;
}

static void
drop(struct dns_cache *c, struct entry *e)
{
    *e->hpprev = e->hnext;
    if (e->hnext != NULL)
        e->hnext->hpprev = e->hpprev;
    lru_unlink(&e->lru);
    c->st.entries--;
    c->st.bytes -= e->size;
    free(e);
}

void
dns_cache_clear(struct dns_cache *c)
{
    while (c->lru.next != &c->lru)
        drop(c, (struct entry *)c->lru.next);
}

void
dns_cache_free(struct dns_cache *c)
{
    if (c == NULL)
        return;
    dns_cache_clear(c);
    free(c->buckets);
    free(c);
}

static struct entry *
find(struct dns_cache *c, const char *key, size_t n, uint16_t type, uint32_t h)
{
    for (struct entry *e = c->buckets[h & c->mask]; e != NULL; e = e->hnext)
        if (e->hash == h && e->type == type && e->name_len == n &&
            memcmp(entry_name(e), key, n) == 0)
            return e;
    return NULL;
}

/* Only answers worth sharing: a complete standard-query response for
 * exactly this question, every record kept by the parser (so all TTLs
 * can be aged). */
static int
cacheable(const struct dns_msg *m, const char *key, uint16_t type)
{
    int rc = DNS_RCODE(m->flags);
    size_t total = (size_t)m->ancount + m->nscount + m->arcount;

    if (!(m->flags & DNS_FLAG_QR) || (m->flags & DNS_FLAG_TC) || DNS_OPCODE(m->flags) != 0)
        return 0;
    if (rc != DNS_RCODE_NOERROR && rc != DNS_RCODE_NXDOMAIN)
        return 0;
    return m->qdcount == 1 && m->qtype == type && strcmp(m->qname, key) == 0 && m->nrr == total;
}

/* How long to keep |m|: its smallest TTL (the SOA's for negative
 * answers, else |neg_ttl|), clamped; max_ttl 0 means no upper bound. */
static uint32_t
keep_for(const struct dns_cache *c, const struct dns_msg *m, const uint8_t *msg, size_t len)
{
    int negative = DNS_RCODE(m->flags) == DNS_RCODE_NXDOMAIN || m->ancount == 0;
    uint32_t ttl = dns_msg_min_ttl(m, msg, len, negative ? c->neg_ttl : c->min_ttl);

    if (ttl < c->min_ttl)
        ttl = c->min_ttl;
    if (c->max_ttl > 0 && ttl > c->max_ttl)
        ttl = c->max_ttl;
    return ttl;
}

static struct entry *
entry_new(const struct dns_msg *m, const char *key, size_t n, const uint8_t *msg, size_t len)
{
    size_t nttl = 0;
    for (size_t i = 0; i < m->nrr; i++)
        nttl += m->rr[i].type != DNS_TYPE_OPT;
    size_t size = sizeof(struct entry) + nttl * sizeof(uint16_t) + len + n + 1;
    struct entry *e = malloc(size);
    if (e == NULL)
        return NULL;
    e->size = size;
    e->nttl = 0;
    for (size_t i = 0; i < m->nrr; i++)
        if (m->rr[i].type != DNS_TYPE_OPT)
            e->ttl_off[e->nttl++] = (uint16_t)m->rr[i].ttl_off;
    e->len = (uint16_t)len;
    e->name_len = (uint16_t)n;
    memcpy(entry_msg(e), msg, len);
    memcpy(entry_name(e), key, n + 1);
    return e;
}

void
dns_cache_put(struct dns_cache *c, const char *name, uint16_t type, const uint8_t *msg, size_t len,
              double now)
{
    struct dns_msg m; /* large: on the stack, once per upstream answer */
    char key[DNS_NAME_MAX + 1];
    int n;

    if (c->max == 0 || len > DNS_MSG_MAX || (n = make_key(key, name)) < 0)
        return;
    if (dns_msg_parse(&m, msg, len) < 0 || !cacheable(&m, key, type))
        return;
    uint32_t ttl = keep_for(c, &m, msg, len);
    if (ttl == 0)
        return;
    struct entry *e = entry_new(&m, key, (size_t)n, msg, len);
    if (e == NULL)
        return; /* the answer is still served, just not remembered */
    uint32_t h = hash_key(key, (size_t)n, type);
    struct entry *old = find(c, key, (size_t)n, type, h);
    if (old != NULL)
        drop(c, old);
    else if (c->st.entries >= c->max) {
        drop(c, (struct entry *)c->lru.prev);
        c->st.evictions++;
    }
    e->hash = h;
    e->type = type;
    e->stored = now;
    e->expires = now + ttl;
    e->hnext = c->buckets[h & c->mask];
    e->hpprev = &c->buckets[h & c->mask];
    if (e->hnext != NULL)
        e->hnext->hpprev = &e->hnext;
    *e->hpprev = e;
    lru_front(c, &e->lru);
    c->st.entries++;
    c->st.bytes += e->size;
    c->st.inserts++;
}

/* A live entry, made most recent; expired ones are dropped on the way. */
static struct entry *
lookup(struct dns_cache *c, const char *name, uint16_t type, double now)
{
    char key[DNS_NAME_MAX + 1];
    int n = make_key(key, name);
    struct entry *e = NULL;

    if (n >= 0 && c->st.entries > 0)
        e = find(c, key, (size_t)n, type, hash_key(key, (size_t)n, type));
    if (e != NULL && now >= e->expires) {
        drop(c, e);
        c->st.expired++;
        e = NULL;
    }
    if (e == NULL) {
        c->st.misses++;
        return NULL;
    }
    lru_unlink(&e->lru);
    lru_front(c, &e->lru);
    c->st.hits++;
    return e;
}

int
dns_cache_get(struct dns_cache *c, const char *name, uint16_t type, double now, uint16_t id,
              uint8_t *out, size_t cap)
{
    struct entry *e = lookup(c, name, type, now);

    if (e == NULL)
        return 0;
    if (cap < e->len)
        return -1;
    const uint8_t *msg = entry_msg(e);
    memcpy(out, msg, e->len);
    out[0] = (uint8_t)(id >> 8);
    out[1] = (uint8_t)id;
    /* No served TTL outlives the entry: a max_ttl clamp also tells clients
     * to come back when chute would ask upstream again. */
    uint32_t elapsed = now > e->stored ? (uint32_t)(now - e->stored) : 0;
    uint32_t left = (uint32_t)(e->expires - now);
    for (size_t i = 0; i < e->nttl; i++) {
        uint32_t t = get32(msg + e->ttl_off[i]);
        t = t > 0x7FFFFFFFu || t <= elapsed ? 0 : t - elapsed; /* RFC 2181 8 */
        put32(out + e->ttl_off[i], t < left ? t : left);
    }
    return (int)e->len;
}

const uint8_t *
dns_cache_peek(struct dns_cache *c, const char *name, uint16_t type, double now, size_t *len)
{
    struct entry *e = lookup(c, name, type, now);

    if (e == NULL)
        return NULL;
    *len = e->len;
    return entry_msg(e);
}

void
dns_cache_stats(const struct dns_cache *c, struct dns_cache_stats *out)
{
    *out = c->st;
}
