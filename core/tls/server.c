#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem/pages.h"
#include "tls/tls_int.h"

/* The server role (the MITM's client side): a configuration holds one
 * P-256 chain, its key and a session cache; each connection is the record
 * pump's state (conn.c) plus a BearSSL server context on BearSSL's
 * single-EC policy. The ClientHello passes through tls_hello_resume_ok
 * before the engine sees it, and the cache's load() obeys the answer. */

#define CACHE_SESSIONS 128 /* BearSSL's LRU: 100 bytes each */
#define CACHE_ENTRY 100
/* A minted leaf's cache is smaller: a mint holds a thousand of them, and
 * a browser resumes one session or a few per host. */
#define MINTED_SESSIONS 16

struct tls_server {
    struct tls_conn c; /* first */
    br_ssl_server_context sc;
    struct tls_server_cfg *cfg;
    int resume_ok; /* this ClientHello may resume */
    const char *const *alpn; /* what this connection offers: the cfg's, or the caller's */
    size_t nalpn;
};

#define SERVER_OF(conn) ((struct tls_server *)(void *)(conn))

static const char *const default_alpn[] = {"h2", "http/1.1"}; /* our preference */

/* ---- configuration ------------------------------------------------------- */

static void
cache_save(const br_ssl_session_cache_class **ctx, br_ssl_server_context *sc,
           const br_ssl_session_parameters *p)
{
    struct tls_server_cache *k = (struct tls_server_cache *)(void *)ctx;
    k->lru.vtable->save(&k->lru.vtable, sc, p);
}

/* BearSSL calls this only for a ClientHello that asks to resume (a 32-byte
 * session ID), after it has read the whole hello. */
static int
cache_load(const br_ssl_session_cache_class **ctx, br_ssl_server_context *sc,
           br_ssl_session_parameters *p)
{
    struct tls_server_cache *k = (struct tls_server_cache *)(void *)ctx;
    struct tls_server *s = (struct tls_server *)(void *)((char *)sc - offsetof(struct tls_server, sc));
    int found = k->lru.vtable->load(&k->lru.vtable, sc, p);
    if (found && !s->resume_ok) {
        /* A full handshake instead, which handles an ALPN mismatch. (TLS
         * 1.3 clients send a random 32-byte ID: only a cached one counts.) */
        explicit_bzero(p, sizeof(*p));
        s->cfg->stats.resume_refused++;
        return 0;
    }
    return found;
}

static const br_ssl_session_cache_class cache_class = {
    sizeof(struct tls_server_cache),
    cache_save,
    cache_load,
};

static void
cfg_destroy(struct tls_server_cfg *cfg)
{
    for (size_t i = 0; i < cfg->nchain; i++)
        free(cfg->chain[i].data);
    free(cfg->chain);
    if (cfg->sk.x != NULL)
        explicit_bzero(cfg->sk.x, cfg->sk.xlen);
    free(cfg->sk.x);
    if (cfg->cache_store != NULL)
        explicit_bzero(cfg->cache_store, cfg->cache_len); /* master secrets */
    free(cfg->cache_store);
    explicit_bzero(cfg, sizeof(*cfg));
    free(cfg);
}

/* NULL if |sk| is a P-256 key for the leaf |cert|, else the reason. */
static const char *
check_pair(const br_x509_certificate *cert, const br_ec_private_key *sk, char *buf, size_t n)
{
    br_x509_decoder_context dc;
    br_ec_public_key pub;
    unsigned char q[BR_EC_KBUF_PUB_MAX_SIZE];
    br_x509_decoder_init(&dc, NULL, NULL);
    br_x509_decoder_push(&dc, cert->data, cert->data_len);
    const br_x509_pkey *pk = br_x509_decoder_get_pkey(&dc);
    if (pk == NULL) {
        snprintf(buf, n, "tls: certificate: cannot decode it (BearSSL error %d)",
                 br_x509_decoder_last_error(&dc));
        return buf;
    }
    if (pk->key_type != BR_KEYTYPE_EC || pk->key.ec.curve != BR_EC_secp256r1)
        return "tls: certificate key is not EC P-256";
    if (sk->curve != BR_EC_secp256r1)
        return "tls: private key is not P-256";
    size_t qlen = br_ec_compute_pub(br_ec_get_default(), &pub, q, sk);
    if (qlen == 0)
        return "tls: private key is not a valid P-256 key";
    if (qlen != pk->key.ec.qlen || memcmp(q, pk->key.ec.q, qlen) != 0)
        return "tls: private key does not match the certificate";
    return NULL;
}

/* The configuration, with a session cache of |sessions|; |sk| is taken
 * to be the leaf's key. */
static struct tls_server_cfg *
cfg_build(const br_x509_certificate *chain, size_t nchain, const br_ec_private_key *sk,
          size_t sessions, char *err, size_t errlen)
{
    struct tls_server_cfg *cfg = calloc(1, sizeof(*cfg));
    if (cfg == NULL)
        goto oom;
    cfg->refs = 1;
    cfg->chain = calloc(nchain, sizeof(*cfg->chain));
    cfg->sk.x = malloc(sk->xlen);
    cfg->cache_len = sessions * CACHE_ENTRY;
    cfg->cache_store = malloc(cfg->cache_len);
    if (cfg->chain == NULL || cfg->sk.x == NULL || cfg->cache_store == NULL)
        goto oom_cfg;
    for (; cfg->nchain < nchain; cfg->nchain++) {
        br_x509_certificate *c = &cfg->chain[cfg->nchain];
        c->data = malloc(chain[cfg->nchain].data_len);
        if (c->data == NULL)
            goto oom_cfg;
        memcpy(c->data, chain[cfg->nchain].data, chain[cfg->nchain].data_len);
        c->data_len = chain[cfg->nchain].data_len;
    }
    cfg->sk.curve = sk->curve;
    cfg->sk.xlen = sk->xlen;
    memcpy(cfg->sk.x, sk->x, sk->xlen);
    memcpy(cfg->alpn, default_alpn, sizeof(default_alpn));
    cfg->nalpn = sizeof(default_alpn) / sizeof(default_alpn[0]);
    br_ssl_session_cache_lru_init(&cfg->cache.lru, cfg->cache_store, cfg->cache_len);
    cfg->cache.vtable = &cache_class;
    return cfg;
oom_cfg:
    cfg_destroy(cfg);
oom:
    snprintf(err, errlen, "tls: out of memory");
    return NULL;
}

struct tls_server_cfg *
tls_server_cfg_new(const br_x509_certificate *chain, size_t nchain, const br_ec_private_key *sk,
                   char *err, size_t errlen)
{
    char why[96];
    const char *bad = nchain == 0 ? "tls: certificate chain: no certificate in it"
                                  : check_pair(&chain[0], sk, why, sizeof(why));
    if (bad != NULL) {
        snprintf(err, errlen, "%s", bad);
        return NULL;
    }
    return cfg_build(chain, nchain, sk, CACHE_SESSIONS, err, errlen);
}

struct tls_server_cfg *
tls_server_cfg_new_minted(const br_x509_certificate *chain, size_t nchain,
                          const br_ec_private_key *sk, char *err, size_t errlen)
{
    return cfg_build(chain, nchain, sk, MINTED_SESSIONS, err, errlen);
}

/* What the PEM texts hold: the certificates in order, the first key. */
struct pem_parts {
    br_x509_certificate *certs;
    size_t n, cap;
    br_skey_decoder_context skey;
    int keys, oom;
};

static int
on_chain_object(void *arg, const char *name, const unsigned char *der, size_t len)
{
    struct pem_parts *pp = arg;
    if (!tls_pem_is_cert(name))
        return 0;
    if (pp->n == pp->cap) {
        size_t cap = pp->cap ? pp->cap * 2 : 4;
        br_x509_certificate *nc = realloc(pp->certs, cap * sizeof(*nc));
        if (nc == NULL)
            return TLS_PEM_OOM;
        pp->certs = nc;
        pp->cap = cap;
    }
    unsigned char *copy = malloc(len ? len : 1);
    if (copy == NULL)
        return TLS_PEM_OOM;
    memcpy(copy, der, len);
    pp->certs[pp->n].data = copy;
    pp->certs[pp->n++].data_len = len;
    return 0;
}

static int
on_key_object(void *arg, const char *name, const unsigned char *der, size_t len)
{
    struct pem_parts *pp = arg;
    if (pp->keys > 0 || (strcmp(name, "EC PRIVATE KEY") != 0 && strcmp(name, "PRIVATE KEY") != 0))
        return 0; /* e.g. "EC PARAMETERS" before the key */
    pp->keys++;
    br_skey_decoder_init(&pp->skey);
    br_skey_decoder_push(&pp->skey, der, len);
    return 0;
}

/* Reads the whole of |text| with |on_obj|: 0 or a TLS_PEM_* code. */
static int
pem_read(const char *text, int (*on_obj)(void *, const char *, const unsigned char *, size_t),
         struct pem_parts *pp)
{
    struct tls_pem pem;
    tls_pem_init(&pem, on_obj, pp);
    int r = tls_pem_push(&pem, text, strlen(text));
    if (r == 0)
        r = tls_pem_finish(&pem);
    tls_pem_fini(&pem);
    return r;
}

struct tls_server_cfg *
tls_server_cfg_new_pem(const char *chain_pem, const char *key_pem, char *err, size_t errlen)
{
    struct pem_parts pp = {0};
    struct tls_server_cfg *cfg = NULL;
    const br_ec_private_key *sk;
    int r = pem_read(chain_pem ? chain_pem : "", on_chain_object, &pp);
    if (r == TLS_PEM_OOM)
        snprintf(err, errlen, "tls: out of memory");
    else if (r != 0)
        snprintf(err, errlen, "tls: certificate chain: malformed PEM");
    else if (pp.n == 0)
        snprintf(err, errlen, "tls: certificate chain: no certificate in it");
    else if ((r = pem_read(key_pem ? key_pem : "", on_key_object, &pp)) == TLS_PEM_OOM)
        snprintf(err, errlen, "tls: out of memory");
    else if (r != 0)
        snprintf(err, errlen, "tls: private key: malformed PEM");
    else if (pp.keys == 0)
        snprintf(err, errlen, "tls: private key: no EC PRIVATE KEY or PRIVATE KEY in it");
    else if (br_skey_decoder_last_error(&pp.skey) != 0)
        snprintf(err, errlen, "tls: private key: cannot decode it (BearSSL error %d)",
                 br_skey_decoder_last_error(&pp.skey));
    else if ((sk = br_skey_decoder_get_ec(&pp.skey)) == NULL)
        snprintf(err, errlen, "tls: private key is not an EC key");
    else
        cfg = tls_server_cfg_new(pp.certs, pp.n, sk, err, errlen);
    for (size_t i = 0; i < pp.n; i++)
        free(pp.certs[i].data);
    free(pp.certs);
    explicit_bzero(&pp.skey, sizeof(pp.skey));
    return cfg;
}

void
tls_server_cfg_free(struct tls_server_cfg *cfg)
{
    if (cfg != NULL && --cfg->refs == 0)
        cfg_destroy(cfg);
}

struct tls_server_cfg *
tls_server_cfg_ref(struct tls_server_cfg *cfg)
{
    cfg->refs++;
    return cfg;
}

void
tls_server_cfg_stats(const struct tls_server_cfg *cfg, struct tls_server_stats *out)
{
    *out = cfg->stats;
}

/* ---- the role -------------------------------------------------------------- */

static void
server_first_record(struct tls_conn *c, const unsigned char *rec, size_t len)
{
    struct tls_server *s = SERVER_OF(c);
    s->resume_ok = tls_hello_resume_ok(rec, len, s->alpn, s->nalpn, c->offered_id,
                                       &c->offered_len);
}

static int
server_reason(struct tls_conn *c, int e, const char **why)
{
    switch (e) {
    case BR_ERR_SEND_FATAL_ALERT + BR_ALERT_HANDSHAKE_FAILURE:
        /* Typically a TLS 1.3-only client: its suites are all 1.3 ones. */
        *why = "tls: no cipher suite in common with the client (BearSSL 0.6 speaks TLS 1.2 only)";
        return EPROTONOSUPPORT;
    case BR_ERR_SEND_FATAL_ALERT + BR_ALERT_NO_APPLICATION_PROTOCOL:
        *why = "tls: client offers no protocol we speak (ALPN)";
        return EPROTO;
    case BR_ERR_RECV_FATAL_ALERT + BR_ALERT_BAD_CERTIFICATE:
    case BR_ERR_RECV_FATAL_ALERT + BR_ALERT_UNSUPPORTED_CERTIFICATE:
    case BR_ERR_RECV_FATAL_ALERT + BR_ALERT_CERTIFICATE_EXPIRED:
    case BR_ERR_RECV_FATAL_ALERT + BR_ALERT_CERTIFICATE_UNKNOWN:
    case BR_ERR_RECV_FATAL_ALERT + BR_ALERT_UNKNOWN_CA:
        snprintf(c->why, sizeof(c->why), "tls: client does not trust our certificate (alert %d)",
                 e - BR_ERR_RECV_FATAL_ALERT);
        *why = c->why;
        return EPROTO;
    default:
        return tls_conn_reason(c, e, why);
    }
}

/* The name the client asked for (SNI), "" for none. */
static const char *
server_peer(const struct tls_conn *c)
{
    return br_ssl_engine_get_server_name(c->eng);
}

static void
server_done(struct tls_conn *c, const br_ssl_session_parameters *p)
{
    struct tls_server *s = SERVER_OF(c);
    s->cfg->stats.handshakes++;
    if (c->resumed)
        s->cfg->stats.resumed++;
    s->resume_ok = 0; /* no later hello resumes (renegotiation is refused anyway) */
}

static void
server_failed(struct tls_conn *c, int err)
{
    SERVER_OF(c)->cfg->stats.failures++;
}

static void
server_destroy(struct tls_conn *c)
{
    struct tls_server *s = SERVER_OF(c);
    tls_server_cfg_free(s->cfg);
    mem_pages_free(s, sizeof(*s)); /* the pages, keys and records with them, go back unread */
}

static const struct tls_conn_role server_role = {
    .done = server_done,
    .failed = server_failed,
    .reason = server_reason,
    .first_record = server_first_record,
    .destroy = server_destroy,
    .name = "server",
    .peer = server_peer,
};

/* ECDHE-ECDSA AEAD only (an EC key signs; static ECDH and CBC are out),
 * AES-GCM first where AES-NI makes it the fastest, in our order. */
static void
set_suites(br_ssl_engine_context *eng)
{
    static const uint16_t aes_first[] = {
        BR_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        BR_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        BR_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    };
    static const uint16_t chacha_first[] = {
        BR_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        BR_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        BR_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    };
    if (tls_aes_first())
        br_ssl_engine_set_suites(eng, aes_first, sizeof(aes_first) / sizeof(aes_first[0]));
    else
        br_ssl_engine_set_suites(eng, chacha_first, sizeof(chacha_first) / sizeof(chacha_first[0]));
}

struct tls_handshake *
tls_server_start(const struct tls_server_cfg *cfg, struct io_stream *inner, tls_handshake_cb cb,
                 void *arg)
{
    return tls_server_start_alpn(cfg, inner, NULL, 0, cb, arg);
}

struct tls_handshake *
tls_server_start_alpn(const struct tls_server_cfg *cfg, struct io_stream *inner,
                      const char *const *alpn, size_t nalpn, tls_handshake_cb cb, void *arg)
{
    /* Mapped (mem/pages.h): an idle connection's small records touch a
     * page or two of each side of the engine's buffer, so the rest (about
     * 28 KiB) is never resident. */
    struct tls_server *s = mem_pages_alloc(sizeof(*s));
    if (s == NULL) {
        io_close(inner, 0);
        return NULL;
    }
    /* The reference count and the session cache are bookkeeping; the
     * configuration itself stays as it was made. */
    s->cfg = (struct tls_server_cfg *)cfg;
    s->cfg->refs++;
    s->alpn = alpn != NULL ? alpn : (const char *const *)s->cfg->alpn;
    s->nalpn = alpn != NULL ? nalpn : s->cfg->nalpn;
    br_ssl_engine_context *eng = &s->sc.eng;
    br_ssl_server_init_full_ec(&s->sc, s->cfg->chain, s->cfg->nchain, BR_KEYTYPE_EC, &s->cfg->sk);
    br_ssl_engine_set_versions(eng, BR_TLS12, BR_TLS12);
    set_suites(eng);
    br_ssl_engine_add_flags(eng, BR_OPT_NO_RENEGOTIATION | BR_OPT_ENFORCE_SERVER_PREFERENCES |
                                     BR_OPT_FAIL_ON_ALPN_MISMATCH);
    br_ssl_engine_set_buffer(eng, s->c.iobuf, sizeof(s->c.iobuf), 1);
    br_ssl_engine_set_protocol_names(eng, (const char **)s->alpn, s->nalpn);
    br_ssl_server_set_cache(&s->sc, &s->cfg->cache.vtable);
    tls_conn_start(&s->c, &server_role, eng, inner, cb, arg);
    /* On failure the engine is closed and the first step reports its error. */
    (void)br_ssl_server_reset(&s->sc);
    return (struct tls_handshake *)s;
}
