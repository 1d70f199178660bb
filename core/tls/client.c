#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "mem/pages.h"
#include "tls/tls_int.h"

/* The client role: one allocation per connection holds the record pump's
 * state (conn.c), the BearSSL client context, the X.509 context and the
 * session key; the same object is the handshake handle and then the
 * stream. */

#define ALPN_MAX 8

struct tls_client {
    struct tls_conn c; /* first */
    br_ssl_client_context cc;
    struct tls_x509 xw;
    struct tls_ctx *ctx; /* during the handshake only */
    size_t keylen;
    char key[TLS_SESSION_KEY_MAX];
    char host[256];
    const char *alpn[ALPN_MAX];
    char *alpn_store;
};

#define CLIENT_OF(conn) ((struct tls_client *)(void *)(conn))

/* "certificate expired on <date>" for the chain's first certificate out
 * of its dates, when the check saw one. */
static const char *
expired_why(struct tls_client *c)
{
    const struct tls_x509 *w = &c->xw;
    char date[40];
    if (w->bad_time_cert < 0)
        return "tls: certificate expired or not yet valid";
    tls_time_text(w->bad_time, date, sizeof(date));
    const char *which = w->bad_time_cert == 0 ? "certificate" : "a CA certificate in the chain";
    if (w->bad_time_future)
        snprintf(c->c.why, sizeof(c->c.why),
                 "tls: %s not valid before %s (is this machine's clock right?)", which, date);
    else
        snprintf(c->c.why, sizeof(c->c.why), "tls: %s expired on %s", which, date);
    return c->c.why;
}

/* Errno and reason for an engine that closed during the handshake. */
static int
client_reason(struct tls_conn *conn, int e, const char **why)
{
    switch (e) {
    case BR_ERR_RECV_FATAL_ALERT + BR_ALERT_PROTOCOL_VERSION:
        *why = "tls: server requires TLS 1.3 (BearSSL 0.6 speaks TLS 1.2 only)";
        return EPROTONOSUPPORT;
    case BR_ERR_X509_EXPIRED:
        *why = expired_why(CLIENT_OF(conn));
        return EPROTO;
    case BR_ERR_X509_BAD_SERVER_NAME:
        snprintf(conn->why, sizeof(conn->why),
                 "tls: host name does not match the certificate (it is not for '%.80s')",
                 CLIENT_OF(conn)->host);
        *why = conn->why;
        return EPROTO;
    default:
        return tls_conn_reason(conn, e, why);
    }
}

static const char *
client_peer(const struct tls_conn *conn)
{
    return ((const struct tls_client *)(const void *)conn)->host;
}

static void
client_done(struct tls_conn *conn, const br_ssl_session_parameters *p)
{
    struct tls_client *c = CLIENT_OF(conn);
    struct tls_ctx *t = c->ctx;
    if (p->session_id_len != 0)
        tls_session_put(t->sessions, c->key, c->keylen, p);
    else
        tls_session_forget(t->sessions, c->key, c->keylen);
    t->stats.handshakes++;
    if (conn->resumed)
        t->stats.resumed++;
    tls_x509_fini(&c->xw);
    c->ctx = NULL;
}

static void
client_failed(struct tls_conn *conn, int err)
{
    struct tls_client *c = CLIENT_OF(conn);
    struct tls_ctx *t = c->ctx;
    t->stats.failures++;
    if (err == EPROTONOSUPPORT)
        t->stats.tls13_only++;
    if (conn->offered_len != 0)
        tls_session_forget(t->sessions, c->key, c->keylen);
}

static void
client_destroy(struct tls_conn *conn)
{
    struct tls_client *c = CLIENT_OF(conn);
    tls_x509_fini(&c->xw);
    free(c->alpn_store);
    mem_pages_free(c, sizeof(*c)); /* the pages, keys and records with them, go back unread */
}

static const struct tls_conn_role client_role = {
    .done = client_done,
    .failed = client_failed,
    .reason = client_reason,
    .destroy = client_destroy,
    .name = "client",
    .peer = client_peer,
};

/* Fills |ip| when |host| is an IP literal ("[::1]" too); its length or 0. */
static size_t
parse_ip(const char *host, unsigned char ip[16])
{
    char buf[64];
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof(buf))
        return 0;
    memcpy(buf, host, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET, buf, ip) == 1)
        return 4;
    if (inet_pton(AF_INET6, buf, ip) == 1)
        return 16;
    return 0;
}

/* Copies the ALPN names (BearSSL links the array, and the stream returns
 * one of these pointers); NULL on success, else the reason. */
static const char *
copy_alpn(struct tls_client *c, const struct tls_client_opts *o)
{
    size_t total = 0;
    if (o->nalpn > ALPN_MAX)
        return "tls: too many ALPN names";
    for (size_t i = 0; i < o->nalpn; i++) {
        size_t l = o->alpn[i] ? strlen(o->alpn[i]) : 0;
        if (l == 0 || l > 255)
            return "tls: bad ALPN name";
        total += l + 1;
    }
    if (o->nalpn == 0)
        return NULL;
    c->alpn_store = malloc(total);
    if (c->alpn_store == NULL)
        return "tls: out of memory";
    char *p = c->alpn_store;
    for (size_t i = 0; i < o->nalpn; i++) {
        size_t l = strlen(o->alpn[i]) + 1;
        memcpy(p, o->alpn[i], l);
        c->alpn[i] = p;
        p += l;
    }
    return NULL;
}

/* TLS 1.2 ECDHE AEAD suites, AES-GCM first where AES-NI makes it the
 * fastest (ChaCha20 is 6x slower there, much faster without). One CBC
 * suite for old RSA servers, last. */
static void
set_suites(br_ssl_engine_context *eng)
{
    static const uint16_t aes_first[] = {
        BR_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,       BR_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        BR_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,       BR_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        BR_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, BR_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        BR_TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
    };
    static const uint16_t chacha_first[] = {
        BR_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, BR_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        BR_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,       BR_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        BR_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,       BR_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        BR_TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
    };
    if (tls_aes_first())
        br_ssl_engine_set_suites(eng, aes_first, sizeof(aes_first) / sizeof(aes_first[0]));
    else
        br_ssl_engine_set_suites(eng, chacha_first, sizeof(chacha_first) / sizeof(chacha_first[0]));
}

struct tls_handshake *
tls_client_start(struct tls_ctx *t, struct io_stream *inner, const struct tls_client_opts *o,
                 tls_handshake_cb cb, void *arg)
{
    struct tls_client *c = mem_pages_alloc(sizeof(*c)); /* as the server's (server.c) */
    if (c == NULL) {
        io_close(inner, 0);
        return NULL;
    }
    br_ssl_engine_context *eng = &c->cc.eng;
    c->ctx = t;
    tls_conn_start(&c->c, &client_role, eng, inner, cb, arg);

    const char *host = o->host ? o->host : "";
    const char *sni = o->sni && o->sni[0] ? o->sni : NULL;
    const char *bad = NULL;
    c->xw.iplen = parse_ip(host, c->xw.ip);
    if (sni == NULL && c->xw.iplen == 0)
        sni = host;
    if (host[0] == '\0' || strlen(host) >= sizeof(c->host) || (sni && strlen(sni) > 255))
        bad = "tls: bad host or SNI";
    else if ((bad = copy_alpn(c, o)) == NULL &&
             (c->keylen = tls_session_key(c->key, sizeof(c->key), host, o->port, sni,
                                          o->skip_verify)) == 0)
        bad = "tls: bad host or SNI";
    if (bad != NULL) {
        tls_conn_start_fail(&c->c, bad); /* reported from the loop too */
        return (struct tls_handshake *)c;
    }
    strcpy(c->host, host);

    br_ssl_client_init_full(&c->cc, &c->xw.u.minimal, t->anchors, t->nanchors);
    br_ssl_engine_set_versions(eng, BR_TLS12, BR_TLS12);
    set_suites(eng);
    br_ssl_engine_add_flags(eng, BR_OPT_NO_RENEGOTIATION | BR_OPT_FAIL_ON_ALPN_MISMATCH);
    br_ssl_engine_set_buffer(eng, c->c.iobuf, sizeof(c->c.iobuf), 1);
    if (o->nalpn != 0)
        br_ssl_engine_set_protocol_names(eng, c->alpn, o->nalpn);
    tls_x509_init(&c->xw, c->xw.iplen ? NULL : c->host, o->skip_verify);
    br_ssl_engine_set_x509(eng, &c->xw.vtable);

    br_ssl_session_parameters p;
    int resume = tls_session_get(t->sessions, c->key, c->keylen, &p);
    if (resume) {
        br_ssl_engine_set_session_parameters(eng, &p);
        c->c.offered_len = p.session_id_len;
        memcpy(c->c.offered_id, p.session_id, sizeof(c->c.offered_id));
        explicit_bzero(&p, sizeof(p));
    }
    /* On failure the engine is closed and the first step reports its error. */
    (void)br_ssl_client_reset(&c->cc, sni, resume);
    return (struct tls_handshake *)c;
}
