#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tls/tls_int.h"

/* What a server must prove: the trust anchors, and the certificate check
 * that runs against them. */

#define SYSTEM_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define EE_MAX (64 * 1024) /* a larger end-entity certificate is refused */
#define SESSION_CACHE_SIZE 256

struct loader {
    struct tls_bytes dn;
    br_x509_trust_anchor *tas;
    size_t n, cap, unusable;
    int oom;
};

/* Turns the DER |der| into an anchor whose DN and key bytes live in one
 * block (dn.data), since the decoder's copies die with it. */
static void
add_anchor(struct loader *l, const unsigned char *der, size_t len)
{
    br_x509_decoder_context dc;
    l->dn.len = 0;
    br_x509_decoder_init(&dc, tls_bytes_append, &l->dn);
    br_x509_decoder_push(&dc, der, len);
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

static int
on_pem_object(void *arg, const char *name, const unsigned char *der, size_t len)
{
    struct loader *l = arg;
    if (tls_pem_is_cert(name))
        add_anchor(l, der, len);
    return l->oom ? TLS_PEM_OOM : 0;
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
    struct loader l = {0};
    struct tls_pem pem;
    int ret = -1, r = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "tls: cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    tls_pem_init(&pem, on_pem_object, &l);
    unsigned char chunk[8192];
    size_t got;
    while (r == 0 && (got = fread(chunk, 1, sizeof(chunk), f)) > 0)
        r = tls_pem_push(&pem, chunk, got);
    /* A file without a final newline would lose its last certificate. */
    if (r == 0)
        r = tls_pem_finish(&pem);
    if (ferror(f))
        snprintf(err, errlen, "tls: cannot read %s: %s", path, strerror(errno));
    else if (r == TLS_PEM_OOM)
        snprintf(err, errlen, "tls: out of memory loading %s", path);
    else if (r != 0)
        snprintf(err, errlen, "tls: %s: malformed PEM after %zu certificates", path, l.n);
    else if (l.n == 0 && l.unusable > 0)
        snprintf(err, errlen, "tls: %s: no usable certificate (%zu unreadable)", path, l.unusable);
    else if (l.n == 0)
        snprintf(err, errlen, "tls: %s: no certificate in it", path);
    else
        ret = 0;
    fclose(f);
    tls_pem_fini(&pem);
    tls_bytes_fini(&l.dn);
    if (ret != 0) {
        tls_trust_free(l.tas, l.n);
        return -1;
    }
    *out = l.tas;
    *n = l.n;
    return 0;
}

/* ---- certificate check ------------------------------------------------- */

/* see tls_int.h */
int
tls_der_next(const unsigned char **p, const unsigned char *end, unsigned *tag,
             const unsigned char **val, size_t *len)
{
    const unsigned char *q = *p;
    if (end - q < 2 || (q[0] & 0x1f) == 0x1f)
        return -1;
    *tag = *q++;
    size_t l = *q++;
    if (l & 0x80) {
        size_t n = l & 0x7f;
        if (n == 0 || n > 4 || (size_t)(end - q) < n)
            return -1;
        for (l = 0; n > 0; n--)
            l = (l << 8) | *q++;
    }
    if ((size_t)(end - q) < l)
        return -1;
    *val = q;
    *len = l;
    *p = q + l;
    return 0;
}

/* see tls_int.h */
int
tls_der_ext(const unsigned char *der, size_t len, const unsigned char *oid, size_t oidlen,
            const unsigned char **val, size_t *vlen)
{
    const unsigned char *p = der, *end = der + len, *v;
    size_t l;
    unsigned tag = 0;
    if (tls_der_next(&p, end, &tag, &v, &l) != 0 || tag != 0x30) /* Certificate */
        return 0;
    p = v, end = v + l;
    if (tls_der_next(&p, end, &tag, &v, &l) != 0 || tag != 0x30) /* TBSCertificate */
        return 0;
    p = v, end = v + l;
    while (p < end) { /* to extensions [3] */
        if (tls_der_next(&p, end, &tag, &v, &l) != 0)
            return 0;
        if (tag == 0xa3)
            break;
    }
    if (tag != 0xa3)
        return 0;
    p = v, end = v + l;
    if (tls_der_next(&p, end, &tag, &v, &l) != 0 || tag != 0x30) /* Extensions */
        return 0;
    p = v, end = v + l;
    while (p < end) {
        const unsigned char *e, *eend, *o;
        size_t olen;
        if (tls_der_next(&p, end, &tag, &e, &l) != 0 || tag != 0x30)
            return 0;
        eend = e + l;
        if (tls_der_next(&e, eend, &tag, &o, &olen) != 0 || tag != 0x06)
            return 0;
        if (olen != oidlen || memcmp(o, oid, oidlen) != 0)
            continue;
        if (tls_der_next(&e, eend, &tag, val, vlen) != 0)
            return 0;
        if (tag == 0x01 && tls_der_next(&e, eend, &tag, val, vlen) != 0) /* critical */
            return 0;
        return tag == 0x04; /* extnValue */
    }
    return 0;
}

/* see tls_int.h */
int
tls_der_san_has_ip(const unsigned char *der, size_t len, const unsigned char *ip, size_t iplen)
{
    static const unsigned char san_oid[] = {0x55, 0x1d, 0x11}; /* 2.5.29.17 */
    const unsigned char *g, *gend, *v;
    size_t l;
    unsigned tag;
    if (!tls_der_ext(der, len, san_oid, sizeof(san_oid), &g, &l))
        return 0;
    gend = g + l;
    if (tls_der_next(&g, gend, &tag, &v, &l) != 0 || tag != 0x30) /* GeneralNames */
        return 0;
    g = v, gend = v + l;
    while (g < gend) {
        if (tls_der_next(&g, gend, &tag, &v, &l) != 0)
            return 0;
        if (tag == 0x87 && l == iplen && memcmp(v, ip, iplen) == 0) /* iPAddress */
            return 1;
    }
    return 0;
}

/* The class methods get &w->vtable, the first member. */
#define XW(ctx) ((struct tls_x509 *)(void *)(ctx))

static void
xw_start_chain(const br_x509_class **ctx, const char *server_name)
{
    struct tls_x509 *w = XW(ctx);
    w->ncert = 0;
    w->ee_len = 0;
    w->bad_time_cert = -1;
    /* The engine passes the SNI; the certificate must match the host. */
    if (!w->skip)
        w->u.minimal.vtable->start_chain(&w->u.minimal.vtable, w->name);
}

static void
xw_start_cert(const br_x509_class **ctx, uint32_t length)
{
    struct tls_x509 *w = XW(ctx);
    w->head_len = 0;
    if (w->ncert == 0) {
        if (w->skip) {
            br_x509_decoder_init(&w->u.dec, NULL, NULL);
        } else if (w->iplen != 0 && length <= EE_MAX) {
            free(w->ee);
            w->ee = malloc(length ? length : 1);
            w->ee_cap = w->ee ? length : 0;
            w->ee_len = 0;
        }
    }
    if (!w->skip)
        w->u.minimal.vtable->start_cert(&w->u.minimal.vtable, length);
}

static void
xw_append(const br_x509_class **ctx, const unsigned char *buf, size_t len)
{
    struct tls_x509 *w = XW(ctx);
    if (w->head_len < sizeof(w->head)) {
        size_t k = sizeof(w->head) - w->head_len < len ? sizeof(w->head) - w->head_len : len;
        memcpy(w->head + w->head_len, buf, k);
        w->head_len += k;
    }
    if (w->ncert == 0) {
        if (w->skip)
            br_x509_decoder_push(&w->u.dec, buf, len);
        else if (w->ee != NULL && len <= w->ee_cap - w->ee_len) {
            memcpy(w->ee + w->ee_len, buf, len);
            w->ee_len += len;
        }
    }
    if (!w->skip)
        w->u.minimal.vtable->append(&w->u.minimal.vtable, buf, len);
}

/* Notes the first certificate whose dates do not cover now, so an
 * "expired" failure can say which one and since when (BearSSL only says
 * that one did). The same clock as BearSSL's: time() (no time is set). */
static void
note_dates(struct tls_x509 *w)
{
    long long nb, na, now = (long long)time(NULL);
    if (w->skip || w->bad_time_cert >= 0 ||
        tls_der_validity(w->head, w->head_len, &nb, &na) != 0)
        return;
    if (now < nb || now > na) {
        w->bad_time_cert = w->ncert;
        w->bad_time_future = now < nb;
        w->bad_time = now < nb ? nb : na;
    }
}

static void
xw_end_cert(const br_x509_class **ctx)
{
    struct tls_x509 *w = XW(ctx);
    if (!w->skip)
        w->u.minimal.vtable->end_cert(&w->u.minimal.vtable);
    note_dates(w);
    w->ncert++;
}

static unsigned
xw_end_chain(const br_x509_class **ctx)
{
    struct tls_x509 *w = XW(ctx);
    unsigned r;
    if (w->skip) {
        if (w->ncert == 0)
            return BR_ERR_X509_EMPTY_CHAIN;
        if (br_x509_decoder_get_pkey(&w->u.dec) != NULL)
            return 0;
        r = (unsigned)br_x509_decoder_last_error(&w->u.dec);
        return r ? r : BR_ERR_X509_TRUNCATED;
    }
    r = w->u.minimal.vtable->end_chain(&w->u.minimal.vtable);
    if (r == 0 && w->iplen != 0 &&
        (w->ee == NULL || !tls_der_san_has_ip(w->ee, w->ee_len, w->ip, w->iplen)))
        r = BR_ERR_X509_BAD_SERVER_NAME;
    free(w->ee);
    w->ee = NULL;
    w->ee_cap = w->ee_len = 0;
    return r;
}

static const br_x509_pkey *
xw_get_pkey(const br_x509_class *const *ctx, unsigned *usages)
{
    struct tls_x509 *w = XW(ctx);
    if (w->skip) {
        if (usages != NULL)
            *usages = BR_KEYTYPE_KEYX | BR_KEYTYPE_SIGN;
        return br_x509_decoder_get_pkey(&w->u.dec);
    }
    return w->u.minimal.vtable->get_pkey(&w->u.minimal.vtable, usages);
}

static const br_x509_class xw_vtable = {
    sizeof(struct tls_x509), xw_start_chain, xw_start_cert, xw_append,
    xw_end_cert,              xw_end_chain,   xw_get_pkey,
};

void
tls_x509_init(struct tls_x509 *w, const char *name, int skip)
{
    w->vtable = &xw_vtable;
    w->name = name;
    w->bad_time_cert = -1;
    w->skip = skip != 0;
}

void
tls_x509_fini(struct tls_x509 *w)
{
    free(w->ee);
    w->ee = NULL;
    w->ee_cap = w->ee_len = 0;
}

/* ---- context ------------------------------------------------------------- */

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
    /* SSL_CERT_FILE replaces the system bundle, as it does for OpenSSL
     * and curl: a machine's private origins are trusted the same way. */
    const char *sys = getenv("SSL_CERT_FILE");
    if (sys == NULL || sys[0] == '\0')
        sys = SYSTEM_BUNDLE;
    if (tls_trust_load(ca_file ? ca_file : sys, &t->anchors, &t->nanchors, err,
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

const struct log_counter tls_counters[] = {
#define X(field, key) LOG_COUNTER(struct tls_stats, field, key)
    TLS_STATS(X)
#undef X
    LOG_COUNTER_END};
