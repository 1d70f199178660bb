#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls/tls_int.h"

#define SYSTEM_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define SESSION_CACHE_SIZE 256

/* A growable byte buffer fed by BearSSL's PEM and X.509 decoders. */
struct bytes {
    unsigned char *p;
    size_t len, cap;
    int oom;
};

static void
bytes_append(void *ctx, const void *data, size_t len)
{
    struct bytes *b = ctx;
    if (b->oom)
        return;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 2048;
        while (cap < b->len + len)
            cap *= 2;
        unsigned char *np = realloc(b->p, cap);
        if (np == NULL) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, len);
    b->len += len;
}

struct loader {
    const char *path;
    br_pem_decoder_context pem;
    struct bytes der, dn;
    int in_cert;
    br_x509_trust_anchor *tas;
    size_t n, cap, unusable;
    int oom;
};

/* Turns the DER in l->der into an anchor whose DN and key bytes live in
 * one block (dn.data), since the decoder's copies die with it. */
static void
add_anchor(struct loader *l)
{
    br_x509_decoder_context dc;
    l->dn.len = 0;
    br_x509_decoder_init(&dc, bytes_append, &l->dn);
    br_x509_decoder_push(&dc, l->der.p, l->der.len);
    const br_x509_pkey *pk = br_x509_decoder_get_pkey(&dc);
    if (pk == NULL || l->dn.oom) {
        l->unusable++; /* e.g. a key type BearSSL lacks: skip, keep the rest */
        return;
    }
    size_t klen = pk->key_type == BR_KEYTYPE_RSA ? pk->key.rsa.nlen + pk->key.rsa.elen
                                                 : pk->key.ec.qlen;
    unsigned char *blk = malloc(l->dn.len + klen);
    if (blk == NULL || (l->n == l->cap && l->cap > SIZE_MAX / 2 / sizeof(*l->tas))) {
        free(blk);
        l->oom = 1;
        return;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        br_x509_trust_anchor *nt = realloc(l->tas, cap * sizeof(*nt));
        if (nt == NULL) {
            free(blk);
            l->oom = 1;
            return;
        }
        l->tas = nt;
        l->cap = cap;
    }
    br_x509_trust_anchor *ta = &l->tas[l->n++];
    memset(ta, 0, sizeof(*ta));
    memcpy(blk, l->dn.p, l->dn.len);
    ta->dn.data = blk;
    ta->dn.len = l->dn.len;
    /* A non-CA certificate becomes a direct-trust anchor: it pins that
     * very server key (a self-signed server certificate as ca_file). */
    ta->flags = br_x509_decoder_isCA(&dc) ? BR_X509_TA_CA : 0;
    ta->pkey.key_type = pk->key_type;
    unsigned char *k = blk + l->dn.len;
    if (pk->key_type == BR_KEYTYPE_RSA) {
        memcpy(k, pk->key.rsa.n, pk->key.rsa.nlen);
        memcpy(k + pk->key.rsa.nlen, pk->key.rsa.e, pk->key.rsa.elen);
        ta->pkey.key.rsa.n = k;
        ta->pkey.key.rsa.nlen = pk->key.rsa.nlen;
        ta->pkey.key.rsa.e = k + pk->key.rsa.nlen;
        ta->pkey.key.rsa.elen = pk->key.rsa.elen;
    } else {
        memcpy(k, pk->key.ec.q, pk->key.ec.qlen);
        ta->pkey.key.ec.curve = pk->key.ec.curve;
        ta->pkey.key.ec.q = k;
        ta->pkey.key.ec.qlen = pk->key.ec.qlen;
    }
}

/* 0, or -1 on a PEM syntax error. */
static int
feed(struct loader *l, const unsigned char *p, size_t len)
{
    while (len > 0) {
        size_t k = br_pem_decoder_push(&l->pem, p, len);
        p += k;
        len -= k;
        switch (br_pem_decoder_event(&l->pem)) {
        case BR_PEM_BEGIN_OBJ: {
            const char *name = br_pem_decoder_name(&l->pem);
            l->in_cert = strcmp(name, "CERTIFICATE") == 0 || strcmp(name, "X509 CERTIFICATE") == 0;
            l->der.len = 0;
            l->der.oom = 0;
            br_pem_decoder_setdest(&l->pem, l->in_cert ? bytes_append : NULL, &l->der);
            break;
        }
        case BR_PEM_END_OBJ:
            if (l->in_cert) {
                if (l->der.oom)
                    l->oom = 1;
                else
                    add_anchor(l);
            }
            l->in_cert = 0;
            break;
        case BR_PEM_ERROR:
            return -1;
        default:
            break;
        }
    }
    return 0;
}

void
tls_trust_free(br_x509_trust_anchor *tas, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(tas[i].dn.data);
    free(tas);
}

int
tls_trust_load(const char *path, br_x509_trust_anchor **out, size_t *n, char *err,
               size_t errlen)
{
    struct loader l = {.path = path};
    int ret = -1;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "tls: cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    br_pem_decoder_init(&l.pem);
    unsigned char chunk[8192];
    size_t got;
    int bad = 0;
    while (!bad && !l.oom && (got = fread(chunk, 1, sizeof(chunk), f)) > 0)
        bad = feed(&l, chunk, got);
    /* The END line only counts once terminated: a file without a final
     * newline would lose its last certificate. */
    if (!bad && !l.oom)
        bad = feed(&l, (const unsigned char *)"\n", 1);
    if (ferror(f))
        snprintf(err, errlen, "tls: cannot read %s: %s", path, strerror(errno));
    else if (l.oom)
        snprintf(err, errlen, "tls: out of memory loading %s", path);
    else if (bad)
        snprintf(err, errlen, "tls: %s: malformed PEM after %zu certificates", path, l.n);
    else if (l.n == 0 && l.unusable > 0)
        snprintf(err, errlen, "tls: %s: no usable certificate (%zu unreadable)", path, l.unusable);
    else if (l.n == 0)
        snprintf(err, errlen, "tls: %s: no certificate in it", path);
    else
        ret = 0;
    fclose(f);
    free(l.der.p);
    free(l.dn.p);
    if (ret != 0) {
        tls_trust_free(l.tas, l.n);
        return -1;
    }
    *out = l.tas;
    *n = l.n;
    return 0;
}

struct tls_ctx *
tls_ctx_new(const char *ca_file, char *err, size_t errlen)
{
    struct tls_ctx *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        snprintf(err, errlen, "tls: out of memory");
        return NULL;
    }
    t->sessions = tls_session_cache_new(SESSION_CACHE_SIZE);
    if (t->sessions == NULL) {
        snprintf(err, errlen, "tls: out of memory");
        free(t);
        return NULL;
    }
    if (tls_trust_load(ca_file ? ca_file : SYSTEM_BUNDLE, &t->anchors, &t->nanchors, err,
                       errlen) != 0) {
        tls_session_cache_free(t->sessions);
        free(t);
        return NULL;
    }
    return t;
}

void
tls_ctx_free(struct tls_ctx *t)
{
    if (t == NULL)
        return;
    tls_trust_free(t->anchors, t->nanchors);
    tls_session_cache_free(t->sessions);
    free(t);
}

size_t
tls_ctx_anchor_count(const struct tls_ctx *t)
{
    return t->nanchors;
}

void
tls_ctx_stats(const struct tls_ctx *t, struct tls_stats *out)
{
    *out = t->stats;
}
