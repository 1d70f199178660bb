#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls/x509w.h"

/* Leaves for the MITM: one P-256 key for all of them (made here, so a
 * mint costs one signature, ~0.4 ms), a server configuration per host
 * ([leaf, CA] plus its session cache) kept in an LRU, re-minted a day
 * before its notAfter. */

#define DEFAULT_MAX 1024
#define LEAF_DAYS 46 /* under every step of the CA/B Forum's SC-081 (47 days) */
#define HOST_MAX 253

struct leaf {
    struct leaf *hnext;       /* hash chain */
    struct leaf *prev, *next; /* LRU list: head is the most recent */
    struct tls_server_cfg *cfg; /* the cache's reference */
    double renew_at;          /* wall clock: re-mint from then on */
    uint32_t hash;
    uint8_t iplen; /* part of the key: "127.0.0.2." is a name, "127.0.0.2" an address */
    char host[]; /* the key: a lower-case name or an address as inet_ntop writes it */
};

struct tls_mint {
    struct tls_ca *ca;
    br_ec_private_key sk;
    unsigned char kbuf[BR_EC_KBUF_PRIV_MAX_SIZE];
    unsigned char pub[BR_EC_KBUF_PUB_MAX_SIZE];
    size_t pub_len;
    struct leaf **buckets;
    size_t mask; /* buckets - 1, a power of two minus one */
    struct leaf *head, *tail;
    size_t max;
    struct tls_mint_stats stats;
};

const struct log_counter tls_mint_counters[] = {
#define X(field, key) LOG_COUNTER(struct tls_mint_stats, field, key)
    TLS_MINT_STATS(X)
#undef X
        LOG_COUNTER_END};

struct tls_mint *
tls_mint_new(struct tls_ca *ca, size_t cache_max, char *err, size_t errlen)
{
    size_t max = cache_max ? cache_max : DEFAULT_MAX, n = 16;
    while (n < max && n < ((size_t)1 << 24))
        n *= 2;
    struct tls_mint *m = calloc(1, sizeof(*m));
    if (m == NULL || (m->buckets = calloc(n, sizeof(*m->buckets))) == NULL) {
        free(m);
        snprintf(err, errlen, "tls: out of memory");
        return NULL;
    }
    m->max = max;
    m->mask = n - 1;
    m->ca = ca;
    m->pub_len = x509w_keygen(&m->sk, m->kbuf, m->pub);
    if (m->pub_len == 0) {
        snprintf(err, errlen, "tls: cannot make the leaves' P-256 key");
        tls_mint_free(m);
        return NULL;
    }
    return m;
}

static void
lru_unlink(struct tls_mint *m, struct leaf *l)
{
    if (l->prev != NULL)
        l->prev->next = l->next;
    else
        m->head = l->next;
    if (l->next != NULL)
        l->next->prev = l->prev;
    else
        m->tail = l->prev;
    l->prev = l->next = NULL;
}

static void
lru_push(struct tls_mint *m, struct leaf *l)
{
    l->next = m->head;
    if (m->head != NULL)
        m->head->prev = l;
    m->head = l;
    if (m->tail == NULL)
        m->tail = l;
}

static void
leaf_drop(struct tls_mint *m, struct leaf *l)
{
    struct leaf **pp = &m->buckets[l->hash & m->mask];
    while (*pp != l)
        pp = &(*pp)->hnext;
    *pp = l->hnext;
    lru_unlink(m, l);
    tls_server_cfg_free(l->cfg); /* handshakes still running keep theirs */
    free(l);
    m->stats.held--;
}

void
tls_mint_free(struct tls_mint *m)
{
    if (m == NULL)
        return;
    while (m->head != NULL)
        leaf_drop(m, m->head);
    free(m->buckets);
    explicit_bzero(m, sizeof(*m));
    free(m);
}

static uint32_t
hash_of(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* |host| as the cache's key in |key| (cap > HOST_MAX) and what the SAN
 * carries: 0 with |*iplen| 0 for a DNS name (lower case, no final dot),
 * 4 or 16 with |ip| for an address; -1 with the reason in |why|. */
static int
canon_host(const char *host, char *key, unsigned char ip[16], size_t *iplen, const char **why)
{
    size_t n = strlen(host);
    char tmp[HOST_MAX + 2];
    *iplen = 0;
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof(tmp)) {
        memcpy(tmp, host + 1, n - 2); /* [v6] */
        tmp[n - 2] = '\0';
        if (inet_pton(AF_INET6, tmp, ip) == 1) {
            *iplen = 16;
            inet_ntop(AF_INET6, ip, key, HOST_MAX + 1);
            return 0;
        }
    }
    if (inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1) {
        *iplen = strchr(host, ':') ? 16 : 4;
        inet_ntop(*iplen == 4 ? AF_INET : AF_INET6, ip, key, HOST_MAX + 1);
        return 0;
    }
    if (n > 0 && host[n - 1] == '.')
        n--;
    if (n == 0 || n > HOST_MAX) {
        *why = n == 0 ? "empty host name" : "host name longer than 253 characters";
        return -1;
    }
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        char c = host[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c == '.') {
            if (label == 0) {
                *why = "empty label in the host name";
                return -1;
            }
            label = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
            if (++label > 63) {
                *why = "a label of the host name is longer than 63 characters";
                return -1;
            }
        } else {
            *why = "host name has a character a certificate cannot carry (IDNs: A-labels)";
            return -1;
        }
        key[i] = c;
    }
    key[n] = '\0';
    return 0;
}

/* A configuration with a leaf for |host| minted now: NULL with |err|. */
static struct tls_server_cfg *
mint(struct tls_mint *m, const char *host, const unsigned char *ip, size_t iplen, double now,
     double *renew_at, char *err, size_t errlen)
{
    struct tls_ca *ca = m->ca;
    unsigned char subject[X509W_NAME_MAX], der[X509W_MAX];
    int64_t nb = (int64_t)now - X509W_DAY; /* a day of clock skew */
    int64_t na = nb + (int64_t)LEAF_DAYS * X509W_DAY;
    if (na > ca->not_after)
        na = ca->not_after;
    if (na - X509W_DAY <= (int64_t)now) {
        snprintf(err, errlen, "tls: the CA certificate expires within a day: make a new CA");
        return NULL;
    }
    /* The CN is a courtesy (clients read the SAN); a name too long for one
     * leaves the subject empty, and the SAN critical. */
    size_t slen = x509w_name(subject, sizeof(subject), NULL,
                             strlen(host) <= X509W_CN_MAX ? host : NULL);
    struct x509w_cert c = {
        .issuer = ca->dn, .issuer_len = ca->dn_len, .subject = subject, .subject_len = slen,
        .pub = m->pub, .pub_len = m->pub_len, .aki = ca->key_id, .aki_len = ca->key_id_len,
        .dns = iplen ? NULL : host, .ip = ip, .ip_len = iplen, .not_before = nb, .not_after = na,
    };
    size_t len = slen ? x509w_sign(der, sizeof(der), &c, &ca->sk) : 0;
    if (len == 0) {
        snprintf(err, errlen, "tls: cannot sign a leaf for %s", host);
        return NULL;
    }
    br_x509_certificate chain[2] = {{der, len}, {ca->der, ca->der_len}};
    struct tls_server_cfg *cfg = tls_server_cfg_new_minted(chain, 2, &m->sk, err, errlen);
    if (cfg != NULL) {
        m->stats.minted++;
        *renew_at = (double)(na - X509W_DAY);
    }
    return cfg;
}

struct tls_server_cfg *
tls_mint_get(struct tls_mint *m, const char *host, double now, char *err, size_t errlen)
{
    char key[HOST_MAX + 2];
    unsigned char ip[16];
    size_t iplen;
    const char *why;
    if (host == NULL || canon_host(host, key, ip, &iplen, &why) != 0) {
        snprintf(err, errlen, "tls: no leaf for '%.253s': %s", host ? host : "",
                 host ? why : "no host");
        return NULL;
    }
    uint32_t h = hash_of(key);
    struct leaf *l = m->buckets[h & m->mask];
    while (l != NULL && (l->hash != h || l->iplen != iplen || strcmp(l->host, key) != 0))
        l = l->hnext;
    if (l != NULL && now < l->renew_at) {
        lru_unlink(m, l);
        lru_push(m, l);
        m->stats.cached++;
        return tls_server_cfg_ref(l->cfg);
    }
    double renew_at;
    struct tls_server_cfg *cfg = mint(m, key, ip, iplen, now, &renew_at, err, errlen);
    if (cfg == NULL && l != NULL && now < l->renew_at + X509W_DAY) {
        m->stats.cached++; /* not renewed, but still valid for a while */
        return tls_server_cfg_ref(l->cfg);
    }
    if (cfg == NULL)
        return NULL;
    if (l != NULL) { /* due for renewal: the new leaf takes its place */
        tls_server_cfg_free(l->cfg);
        l->cfg = cfg;
        l->renew_at = renew_at;
        lru_unlink(m, l);
        lru_push(m, l);
        return tls_server_cfg_ref(cfg);
    }
    size_t klen = strlen(key);
    l = malloc(sizeof(*l) + klen + 1);
    if (l == NULL)
        return cfg; /* served, not cached */
    memcpy(l->host, key, klen + 1);
    l->hash = h;
    l->iplen = (uint8_t)iplen;
    l->cfg = cfg;
    l->renew_at = renew_at;
    l->prev = l->next = NULL;
    if (m->stats.held >= m->max)
        leaf_drop(m, m->tail);
    l->hnext = m->buckets[h & m->mask];
    m->buckets[h & m->mask] = l;
    lru_push(m, l);
    m->stats.held++;
    return tls_server_cfg_ref(cfg);
}

void
tls_mint_stats(const struct tls_mint *m, struct tls_mint_stats *out)
{
    *out = m->stats;
}
