#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ip/tuple.h"

#define START_BUCKETS 1024

struct ip_tuple_table {
    struct ip_tuple_node **b;
    size_t mask, count;
    uint64_t seed; /* random: a client cannot aim its tuples at one bucket */
};

struct ip_tuple_table *
ip_tuple_table_new(void)
{
    struct ip_tuple_table *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->b = calloc(START_BUCKETS, sizeof(*h->b));
    if (h->b == NULL) {
        free(h);
        return NULL;
    }
    h->mask = START_BUCKETS - 1;
    if (getrandom(&h->seed, sizeof(h->seed), GRND_NONBLOCK) != sizeof(h->seed))
        h->seed = (uint64_t)(uintptr_t)h * 0x9e3779b97f4a7c15ull;
    return h;
}

void
ip_tuple_table_free(struct ip_tuple_table *h)
{
    if (h == NULL)
        return;
    free(h->b);
    free(h);
}

static inline uint64_t
mix(uint64_t a, uint64_t b)
{
    __uint128_t m = (__uint128_t)a * b;
    return (uint64_t)m ^ (uint64_t)(m >> 64);
}

/* A keyed multiply-mix over the tuple's 40 bytes (wyhash's core step). */
uint32_t
ip_tuple_hash(const struct ip_tuple_table *h, const struct ip_tuple *k)
{
    uint64_t w[5];
    memcpy(w, k, sizeof(w));
    uint64_t s = h->seed;
    s = mix(w[0] ^ s ^ 0xa0761d6478bd642full, w[1] ^ 0xe7037ed1a0b428dbull);
    s = mix(w[2] ^ s ^ 0x8ebc6af09c88c6e3ull, w[3] ^ 0x589965cc75374cc3ull);
    s = mix(w[4] ^ s ^ 0x1d8e4e27c47d124full, sizeof(w));
    return (uint32_t)(s ^ (s >> 32));
}

struct ip_tuple_node *
ip_tuple_lookup(const struct ip_tuple_table *h, const struct ip_tuple *k, uint32_t hash)
{
    for (struct ip_tuple_node *n = h->b[hash & h->mask]; n != NULL; n = n->_next)
        if (n->_hash == hash && memcmp(&n->key, k, sizeof(*k)) == 0)
            return n;
    return NULL;
}

static int
grow(struct ip_tuple_table *h)
{
    size_t size = (h->mask + 1) * 2;
    struct ip_tuple_node **b = calloc(size, sizeof(*b));
    if (b == NULL)
        return -1;
    for (size_t i = 0; i <= h->mask; i++) {
        struct ip_tuple_node *n = h->b[i];
        while (n != NULL) {
            struct ip_tuple_node *next = n->_next;
            n->_next = b[n->_hash & (size - 1)];
            b[n->_hash & (size - 1)] = n;
            n = next;
        }
    }
    free(h->b);
    h->b = b;
    h->mask = size - 1;
    return 0;
}

int
ip_tuple_insert(struct ip_tuple_table *h, struct ip_tuple_node *n, uint32_t hash)
{
    if (h->count > h->mask && grow(h) != 0 && h->count > 4 * h->mask)
        return -1; /* keep working at a higher load while memory is short */
    n->_hash = hash;
    n->_next = h->b[hash & h->mask];
    h->b[hash & h->mask] = n;
    h->count++;
    return 0;
}

void
ip_tuple_remove(struct ip_tuple_table *h, struct ip_tuple_node *n)
{
    struct ip_tuple_node **pp = &h->b[n->_hash & h->mask];
    while (*pp != NULL && *pp != n)
        pp = &(*pp)->_next;
    if (*pp == n) {
        *pp = n->_next;
        h->count--;
    }
    n->_next = NULL;
}
