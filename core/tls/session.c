#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls/tls_int.h"

/* Client sessions by (host, port, SNI, checked). A linear scan over a
 * fixed array of hashes: 256 compares per connect cost nothing next to
 * a 2 ms handshake, and need no second index to keep in step. */

struct entry {
    uint64_t hash;
    uint64_t used; /* tick of the last get/put; 0 = free slot */
    char *key;
    size_t klen;
    br_ssl_session_parameters p; /* secret: master key inside */
};

struct tls_session_cache {
    size_t cap, count;
    uint64_t tick;
    struct entry e[];
};

static uint64_t
fnv1a(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

size_t
tls_session_key(char *key, size_t cap, const char *host, unsigned short port, const char *sni,
                int skip_verify)
{
    int n = snprintf(key, cap, "%s%c%u%c%s%c%c", host, 0, (unsigned)port, 0, sni ? sni : "", 0,
                     skip_verify ? 's' : 'v');
    if (n < 0 || (size_t)n >= cap)
        return 0;
    return (size_t)n;
}

struct tls_session_cache *
tls_session_cache_new(size_t cap)
{
    struct tls_session_cache *c = calloc(1, sizeof(*c) + cap * sizeof(struct entry));
    if (c != NULL)
        c->cap = cap;
    return c;
}

static void
drop(struct tls_session_cache *c, struct entry *e)
{
    free(e->key);
    explicit_bzero(e, sizeof(*e));
    c->count--;
}

void
tls_session_cache_free(struct tls_session_cache *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->cap; i++)
        if (c->e[i].used != 0)
            drop(c, &c->e[i]);
    free(c);
}

static struct entry *
find(struct tls_session_cache *c, const char *key, size_t klen, uint64_t h)
{
    for (size_t i = 0; i < c->cap; i++) {
        struct entry *e = &c->e[i];
        if (e->used != 0 && e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
            return e;
    }
    return NULL;
}

int
tls_session_get(struct tls_session_cache *c, const char *key, size_t klen,
                br_ssl_session_parameters *out)
{
    struct entry *e = find(c, key, klen, fnv1a(key, klen));
    if (e == NULL)
        return 0;
    e->used = ++c->tick;
    *out = e->p;
    return 1;
}

void
tls_session_put(struct tls_session_cache *c, const char *key, size_t klen,
                const br_ssl_session_parameters *p)
{
    uint64_t h = fnv1a(key, klen);
    struct entry *e = find(c, key, klen, h);
    if (e == NULL) {
        if (c->cap == 0)
            return;
        char *k = malloc(klen);
        if (k == NULL)
            return; /* no resumption next time; not an error */
        struct entry *victim = NULL;
        for (size_t i = 0; i < c->cap; i++) {
            struct entry *x = &c->e[i];
            if (x->used == 0) {
                victim = x;
                break;
            }
            if (victim == NULL || x->used < victim->used)
                victim = x;
        }
        if (victim->used != 0)
            drop(c, victim);
        e = victim;
        memcpy(k, key, klen);
        e->key = k;
        e->klen = klen;
        e->hash = h;
        c->count++;
    }
    e->p = *p;
    e->used = ++c->tick;
}

void
tls_session_forget(struct tls_session_cache *c, const char *key, size_t klen)
{
    struct entry *e = find(c, key, klen, fnv1a(key, klen));
    if (e != NULL)
        drop(c, e);
}

size_t
tls_session_count(const struct tls_session_cache *c)
{
    return c->count;
}
