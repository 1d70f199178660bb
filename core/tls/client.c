#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tls/tls_int.h"

/* One allocation per connection: the BearSSL client context, the X.509
 * context and the bidirectional record buffer, then the same object
 * serves as the handshake handle and, once done, as the stream. Records
 * move between BearSSL's engine and the inner stream (s.inner); the inner
 * stream's callbacks come here in every phase. */

#define ALPN_MAX 8

struct tls_conn {
    struct io_stream s; /* first: handed out as the stream; s.inner is the transport */
    br_ssl_client_context cc;
    struct tls_x509 xw;
    struct tls_ctx *ctx; /* during the handshake only */
    tls_handshake_cb cb;
    void *cb_arg;
    struct io_soon kick; /* the handshake's first step; on_readable for held bytes */
    int start_err, err;
    unsigned handshaking : 1, reading : 1;
    const char *start_why;
    unsigned shut : 1, shut_done : 1, want_drain : 1, read_stalled : 1, resumed : 1;
    unsigned lingering : 1, notified : 1; /* notified: our close_notify is queued */  /* closed by the owner; the last records still go out */
    ev_timer linger;
    ev_timer quiet;          /* after shutdown: close_notify once the server is quiet */
    size_t offered_len;
    unsigned char offered_id[32];
    size_t keylen;
    char key[TLS_SESSION_KEY_MAX];
    char host[256];
    const char *alpn[ALPN_MAX];
    char *alpn_store;
    char why[112];
    unsigned char iobuf[BR_SSL_BUFSIZE_BIDI];
};

#define CONN_OF(p, member) ((struct tls_conn *)((char *)(p) - offsetof(struct tls_conn, member)))

static void
conn_free(struct tls_conn *c)
{
    io_soon_cancel(c->s.loop, &c->kick);
    tls_x509_fini(&c->xw);
    free(c->alpn_store);
    explicit_bzero(c, sizeof(*c)); /* keys and the master secret */
    free(c);
}

static const char closed_why[] = "tls: connection closed during handshake";

/* Errno and reason for an engine that closed during the handshake. The
 * known reasons are static strings; others are formatted into |buf|,
 * which lives until the callback returns. */
static int
hs_reason(int e, char *buf, size_t n, const char **why)
{
    switch (e) {
    case BR_ERR_OK:
        *why = closed_why;
        return ECONNRESET;
    case BR_ERR_RECV_FATAL_ALERT + BR_ALERT_PROTOCOL_VERSION:
        *why = "tls: server requires TLS 1.3 (BearSSL 0.6 speaks TLS 1.2 only)";
        return EPROTONOSUPPORT;
    case BR_ERR_X509_NOT_TRUSTED:
        *why = "tls: certificate not trusted";
        return EPROTO;
    case BR_ERR_X509_BAD_SERVER_NAME:
        *why = "tls: certificate is for another name";
        return EPROTO;
    case BR_ERR_X509_EXPIRED:
        *why = "tls: certificate expired";
        return EPROTO;
    default:
        snprintf(buf, n, "tls: handshake failed (BearSSL error %d)", e);
        *why = buf;
        return EPROTO;
    }
}

/* Errno for an engine that failed after the handshake. */
static int
stream_errno(int e)
{
    if (e == BR_ERR_IO)
        return EIO;
    if (e >= BR_ERR_RECV_FATAL_ALERT && e < BR_ERR_SEND_FATAL_ALERT)
        return ECONNRESET; /* the peer gave up */
    return EBADMSG;
}

static int
would_block(int e)
{
    return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

/* ---- handshake ---------------------------------------------------------- */

static void
hs_fail(struct tls_conn *c, int err, const char *why)
{
    struct tls_ctx *t = c->ctx;
    t->stats.failures++;
    if (err == EPROTONOSUPPORT)
        t->stats.tls13_only++;
    if (c->offered_len != 0)
        tls_session_forget(t->sessions, c->key, c->keylen);
    io_close(c->s.inner, 0);
    c->s.inner = NULL;
    c->cb(c->cb_arg, NULL, err, why);
    conn_free(c);
}

static void
hs_fail_errno(struct tls_conn *c, int err)
{
    if (err == ECONNRESET || err == EPIPE) {
        hs_fail(c, err, closed_why);
        return;
    }
    snprintf(c->why, sizeof(c->why), "tls: %s during handshake", strerror(err));
    hs_fail(c, err, c->why);
}

static const struct io_stream_ops tls_stream_ops;

static void
hs_done(struct tls_conn *c)
{
    struct tls_ctx *t = c->ctx;
    br_ssl_session_parameters p;
    c->handshaking = 0;
    io_read_stop(c->s.inner); /* the owner's read_start takes over */
    br_ssl_engine_get_session_parameters(&c->cc.eng, &p);
    /* No "resumed" getter in 0.6: the server echoes our ID only then. */
    c->resumed = c->offered_len != 0 && p.session_id_len == c->offered_len &&
                 memcmp(p.session_id, c->offered_id, c->offered_len) == 0;
    if (p.session_id_len != 0)
        tls_session_put(t->sessions, c->key, c->keylen, &p);
    else
        tls_session_forget(t->sessions, c->key, c->keylen);
    explicit_bzero(&p, sizeof(p));
    t->stats.handshakes++;
    if (c->resumed)
        t->stats.resumed++;
    tls_x509_fini(&c->xw);
    c->ctx = NULL;
    c->s.ops = &tls_stream_ops;
    c->cb(c->cb_arg, &c->s, 0, NULL);
}

/* Moves records both ways until nothing moves; the inner stream calls
 * back when it has bytes or can take more (it reads all along). */
static void
hs_step(struct tls_conn *c)
{
    br_ssl_engine_context *eng = &c->cc.eng;
    int want;
    if (c->start_err) {
        hs_fail(c, c->start_err, c->start_why);
        return;
    }
    for (;;) {
        unsigned st = br_ssl_engine_current_state(eng);
        unsigned char *buf;
        size_t len;
        ssize_t n;
        if (st & BR_SSL_CLOSED) {
            const char *why;
            int err = hs_reason(br_ssl_engine_last_error(eng), c->why, sizeof(c->why), &why);
            hs_fail(c, err, why);
            return;
        }
        if (st & BR_SSL_SENDAPP) {
            hs_done(c);
            return;
        }
        want = 0;
        if (st & BR_SSL_SENDREC) {
            buf = br_ssl_engine_sendrec_buf(eng, &len);
            n = io_write(c->s.inner, buf, len);
            if (n > 0) {
                br_ssl_engine_sendrec_ack(eng, (size_t)n);
                continue;
            }
            if (n == 0 || !would_block(errno)) {
                hs_fail_errno(c, errno);
                return;
            }
            want |= EV_WRITE;
        }
        if (st & BR_SSL_RECVREC) {
            buf = br_ssl_engine_recvrec_buf(eng, &len);
            n = io_read(c->s.inner, buf, len);
            if (n > 0) {
                br_ssl_engine_recvrec_ack(eng, (size_t)n);
                continue;
            }
            if (n == 0 || !would_block(errno)) {
                hs_fail_errno(c, n == 0 ? ECONNRESET : errno);
                return;
            }
            want |= EV_READ;
        }
        break;
    }
    if (want == 0) { /* the engine wants nothing: it cannot progress */
        const char *why = NULL;
        int e = br_ssl_engine_last_error(eng);
        /* Two statements: the arguments' order of evaluation is unspecified. */
        int err = hs_reason(e ? e : BR_ERR_BAD_STATE, c->why, sizeof(c->why), &why);
        hs_fail(c, err, why);
    }
}

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

static const char *
start_fail(struct tls_conn *c, const char *why)
{
    c->start_err = EINVAL;
    c->start_why = why;
    return why;
}

/* Copies the ALPN names (BearSSL links the array, and the stream returns
 * one of these pointers); NULL on success, else the reason. */
static const char *
copy_alpn(struct tls_conn *c, const struct tls_client_opts *o)
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
    if (br_aes_x86ni_ctr_get_vtable() != NULL)
        br_ssl_engine_set_suites(eng, aes_first, sizeof(aes_first) / sizeof(aes_first[0]));
    else
        br_ssl_engine_set_suites(eng, chacha_first, sizeof(chacha_first) / sizeof(chacha_first[0]));
}

static void on_inner_readable(void *arg);
static void on_inner_drain(void *arg);
static void on_kick(void *arg);

/* BearSSL hands out one record at a time, so a flight is several writes:
 * a socket below must have Nagle off (outbound/direct.c sets TCP_NODELAY),
 * or delayed ACKs add 40 ms to the handshake. */
struct tls_handshake *
tls_client_start(struct tls_ctx *t, struct io_stream *inner, const struct tls_client_opts *o,
                 tls_handshake_cb cb, void *arg)
{
    struct tls_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        io_close(inner, 0);
        return NULL;
    }
    c->s.inner = inner;
    c->s.loop = inner->loop;
    c->ctx = t;
    c->cb = cb;
    c->cb_arg = arg;
    c->handshaking = 1;
    io_soon_init(&c->kick, on_kick, c);
    io_set_callbacks(inner, on_inner_readable, on_inner_drain, c);

    const char *host = o->host ? o->host : "";
    const char *sni = o->sni && o->sni[0] ? o->sni : NULL;
    const char *bad = NULL;
    c->xw.iplen = parse_ip(host, c->xw.ip);
    if (sni == NULL && c->xw.iplen == 0)
        sni = host;
    if (host[0] == '\0' || strlen(host) >= sizeof(c->host) || (sni && strlen(sni) > 255))
        bad = start_fail(c, "tls: bad host or SNI");
    else if ((bad = copy_alpn(c, o)) != NULL)
        start_fail(c, bad);
    else if ((c->keylen = tls_session_key(c->key, sizeof(c->key), host, o->port, sni,
                                          o->skip_verify)) == 0)
        bad = start_fail(c, "tls: bad host or SNI");
    if (bad != NULL) {
        /* Reported from the loop: never from inside this call. */
        io_soon_arm(c->s.loop, &c->kick);
        return (struct tls_handshake *)c;
    }
    strcpy(c->host, host);

    br_ssl_engine_context *eng = &c->cc.eng;
    br_ssl_client_init_full(&c->cc, &c->xw.u.minimal, t->anchors, t->nanchors);
    br_ssl_engine_set_versions(eng, BR_TLS12, BR_TLS12);
    set_suites(eng);
    br_ssl_engine_add_flags(eng, BR_OPT_NO_RENEGOTIATION | BR_OPT_FAIL_ON_ALPN_MISMATCH);
    br_ssl_engine_set_buffer(eng, c->iobuf, sizeof(c->iobuf), 1);
    if (o->nalpn != 0)
        br_ssl_engine_set_protocol_names(eng, c->alpn, o->nalpn);
    tls_x509_init(&c->xw, c->xw.iplen ? NULL : c->host, o->skip_verify);
    br_ssl_engine_set_x509(eng, &c->xw.vtable);

    br_ssl_session_parameters p;
    int resume = tls_session_get(t->sessions, c->key, c->keylen, &p);
    if (resume) {
        br_ssl_engine_set_session_parameters(eng, &p);
        c->offered_len = p.session_id_len;
        memcpy(c->offered_id, p.session_id, sizeof(c->offered_id));
        explicit_bzero(&p, sizeof(p));
    }
    /* On failure the engine is closed and hs_step reports its error. */
    (void)br_ssl_client_reset(&c->cc, sni, resume);
    io_read_start(inner);
    io_soon_arm(c->s.loop, &c->kick);
    return (struct tls_handshake *)c;
}

void
tls_handshake_cancel(struct tls_handshake *h)
{
    struct tls_conn *c = (struct tls_conn *)h;
    io_close(c->s.inner, 0);
    conn_free(c);
}

/* ---- stream ------------------------------------------------------------- */

/* Sends buffered records: 1 when none are left, 0 when the inner stream
 * is full (its on_drain continues), -1 on error. */
static int
send_records(struct tls_conn *c)
{
    br_ssl_engine_context *eng = &c->cc.eng;
    unsigned char *buf;
    size_t len;
    while ((buf = br_ssl_engine_sendrec_buf(eng, &len)) != NULL) {
        ssize_t n = io_write(c->s.inner, buf, len);
        if (n > 0) {
            br_ssl_engine_sendrec_ack(eng, (size_t)n);
            continue;
        }
        if (n < 0 && would_block(errno))
            return 0;
        c->err = n == 0 ? EIO : errno;
        return -1;
    }
    return 1;
}

static void finish_close(struct tls_conn *c);

static void
on_linger_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    finish_close(CONN_OF(w, linger));
}

static void
on_inner_drain(void *arg)
{
    struct tls_conn *c = arg;
    if (c->handshaking) {
        hs_step(c);
        return;
    }
    int r = send_records(c);
    if (r == 0)
        return;
    if (c->lingering) {
        finish_close(c);
        return;
    }
    if (r > 0 && c->notified && !c->shut_done) {
        io_shutdown(c->s.inner);
        c->shut_done = 1;
    }
    if (c->read_stalled) {
        /* A read found the engine waiting for this output: the owner's
         * reader goes on from the loop. */
        c->read_stalled = 0;
        if (c->reading)
            io_soon_arm(c->s.loop, &c->kick);
    }
    if ((c->want_drain || r < 0) && c->s.on_drain != NULL) {
        c->want_drain = 0;
        c->s.on_drain(c->s.arg); /* may close the stream: last */
    }
}

static void
on_inner_readable(void *arg)
{
    struct tls_conn *c = arg;
    if (c->handshaking) {
        hs_step(c);
        return;
    }
    if (c->lingering || !c->reading)
        return;
    /* Armed first: the owner may leave decrypted bytes, or close. */
    io_soon_arm(c->s.loop, &c->kick);
    if (c->s.on_readable != NULL)
        c->s.on_readable(c->s.arg);
}

static void
on_kick(void *arg)
{
    struct tls_conn *c = arg;
    if (c->handshaking) {
        hs_step(c);
        return;
    }
    if (c->reading && c->s.on_readable != NULL)
        c->s.on_readable(c->s.arg);
}

static ssize_t
fail_with(int err)
{
    errno = err;
    return -1;
}

static ssize_t
st_read(struct io_stream *s, void *out, size_t cap)
{
    struct tls_conn *c = (struct tls_conn *)s;
    br_ssl_engine_context *eng = &c->cc.eng;
    if (c->err)
        return fail_with(c->err);
    if (cap == 0)
        return 0; /* as read(2); BearSSL forbids empty acks */
    for (;;) {
        size_t len;
        unsigned char *buf = br_ssl_engine_recvapp_buf(eng, &len);
        if (buf != NULL) {
            size_t n = len < cap ? len : cap;
            memcpy(out, buf, n);
            br_ssl_engine_recvapp_ack(eng, n);
            if (c->shut && !c->shut_done)
                ev_timer_again(c->s.loop, &c->quiet); /* the answer is still coming */
            return (ssize_t)n;
        }
        unsigned st = br_ssl_engine_current_state(eng);
        if (st & BR_SSL_CLOSED) {
            int e = br_ssl_engine_last_error(eng);
            if (e == BR_ERR_OK)
                return 0; /* close_notify seen */
            c->err = stream_errno(e);
            return fail_with(c->err);
        }
        /* E.g. our reply to the peer's close_notify. */
        if (st & BR_SSL_SENDREC) {
            int r = send_records(c);
            if (r < 0)
                return fail_with(c->err);
            if (r > 0)
                continue; /* the engine may have moved on */
        }
        if (!(st & BR_SSL_RECVREC)) {
            c->read_stalled = 1;
            io_soon_cancel(c->s.loop, &c->kick);
            return fail_with(EAGAIN);
        }
        buf = br_ssl_engine_recvrec_buf(eng, &len);
        ssize_t n = io_read(c->s.inner, buf, len);
        if (n > 0) {
            br_ssl_engine_recvrec_ack(eng, (size_t)n);
            continue;
        }
        if (n < 0 && would_block(errno)) {
            io_soon_cancel(c->s.loop, &c->kick); /* all read: the inner stream calls */
            return fail_with(EAGAIN);
        }
        if (n == 0 && c->shut)
            return 0; /* we already ended; BearSSL drops data after that anyway */
        /* A FIN without close_notify may be a truncation attack. */
        c->err = n == 0 ? ECONNRESET : errno;
        return fail_with(c->err);
    }
}

static ssize_t
st_writev(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    struct tls_conn *c = (struct tls_conn *)s;
    br_ssl_engine_context *eng = &c->cc.eng;
    size_t total = 0, want = 0;
    if (c->err)
        return fail_with(c->err);
    if (c->shut)
        return fail_with(EPIPE);
    for (int i = 0; i < iovcnt; i++)
        want += iov[i].iov_len;
    for (int i = 0, full = 0; i < iovcnt && !full; i++) {
        const unsigned char *p = iov[i].iov_base;
        size_t left = iov[i].iov_len;
        while (left > 0) {
            size_t len;
            unsigned char *buf = br_ssl_engine_sendapp_buf(eng, &len);
            if (buf == NULL) {
                /* A full record is waiting for the socket. */
                if (br_ssl_engine_current_state(eng) & BR_SSL_CLOSED) {
                    int e = br_ssl_engine_last_error(eng);
                    c->err = e == BR_ERR_OK ? EPIPE : stream_errno(e);
                    return total ? (ssize_t)total : fail_with(c->err);
                }
                if (send_records(c) < 0)
                    return total ? (ssize_t)total : fail_with(c->err);
                buf = br_ssl_engine_sendapp_buf(eng, &len);
                if (buf == NULL) {
                    full = 1;
                    break;
                }
            }
            size_t n = left < len ? left : len;
            memcpy(buf, p, n);
            br_ssl_engine_sendapp_ack(eng, n);
            p += n;
            left -= n;
            total += n;
        }
    }
    if (total > 0)
        br_ssl_engine_flush(eng, 0); /* else it waits for a full record */
    if (send_records(c) < 0 && total == 0)
        return fail_with(c->err);
    if (total == 0 && want > 0) {
        c->want_drain = 1; /* the inner stream's on_drain comes */
        return fail_with(EAGAIN);
    }
    return (ssize_t)total;
}

/* After our end of data, the close_notify waits until the server has been
 * quiet for this long: most servers then close too, and the flow ends. */
#define QUIET_CLOSE 1.5

static void
on_quiet(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct tls_conn *c = CONN_OF(w, quiet);
    if (c->notified || c->err)
        return;
    c->notified = 1;
    br_ssl_engine_close(&c->cc.eng);
    int r = send_records(c);
    if (r > 0) {
        io_shutdown(c->s.inner);
        c->shut_done = 1;
    }
}

/* BearSSL 0.6 discards application data that arrives after its
 * close_notify went out, until the peer's close_notify: the TLS 1.2 close
 * is not a true half-close. So the client's end of data does not become a
 * close_notify at once (the server's answer would be lost): it goes out
 * once the server has sent nothing for QUIET_CLOSE seconds, or with
 * st_close. */
static int
st_shutdown(struct io_stream *s)
{
    struct tls_conn *c = (struct tls_conn *)s;
    if (c->err)
        return (int)fail_with(c->err);
    if (!c->shut) {
        c->shut = 1; /* no more writes */
        ev_timer_init(&c->quiet, on_quiet, 0, QUIET_CLOSE);
        ev_timer_again(c->s.loop, &c->quiet);
    }
    return 0;
}

/* Decrypted bytes, the end or an error wait to be read. */
static int
readable(const struct tls_conn *c)
{
    size_t len;
    return c->err || br_ssl_engine_recvapp_buf(&c->cc.eng, &len) != NULL ||
           (br_ssl_engine_current_state(&c->cc.eng) & BR_SSL_CLOSED);
}

static void
st_read_start(struct io_stream *s)
{
    struct tls_conn *c = (struct tls_conn *)s;
    c->reading = 1;
    io_read_start(s->inner);
    if (readable(c))
        io_soon_arm(s->loop, &c->kick);
}

static void
st_read_stop(struct io_stream *s)
{
    struct tls_conn *c = (struct tls_conn *)s;
    c->reading = 0;
    io_read_stop(s->inner);
    io_soon_cancel(s->loop, &c->kick);
}

static void
st_close(struct io_stream *s, int reset)
{
    struct tls_conn *c = (struct tls_conn *)s;
    io_soon_cancel(c->s.loop, &c->kick);
    c->reading = 0;
    if (c->shut)
        ev_timer_stop(c->s.loop, &c->quiet);
    if (reset) {
        io_close(c->s.inner, 1);
    } else {
        /* close_notify, best effort, so the server keeps the session.
         * Unread input makes close() send a RST that could overtake it:
         * drain what already arrived first. */
        if (!c->err && !(br_ssl_engine_current_state(&c->cc.eng) & BR_SSL_CLOSED))
            br_ssl_engine_close(&c->cc.eng);
        if (!c->err && send_records(c) == 0) {
            /* Records the inner stream has not taken yet (the relay's last
             * bytes, the close_notify): sent in the background, for 10 s at
             * most. */
            c->lingering = 1;
            c->s.on_drain = NULL;
            c->s.on_readable = NULL;
            io_read_stop(c->s.inner);
            ev_timer_init(&c->linger, on_linger_timeout, 10.0, 0);
            ev_timer_start(c->s.loop, &c->linger);
            return;
        }
        finish_close(c);
        return;
    }
    conn_free(c);
}

static void
finish_close(struct tls_conn *c)
{
    if (c->lingering)
        ev_timer_stop(c->s.loop, &c->linger);
    for (int i = 0; i < 4 && io_read(c->s.inner, c->iobuf, sizeof(c->iobuf)) > 0; i++)
        ;
    io_close(c->s.inner, 0);
    conn_free(c);
}

static const struct io_stream_ops tls_stream_ops = {
    .name = "tls",
    .read = st_read,
    .writev = st_writev,
    .shutdown = st_shutdown,
    .read_start = st_read_start,
    .read_stop = st_read_stop,
    .close = st_close,
};

const char *
tls_stream_alpn(const struct io_stream *s)
{
    if (s == NULL || s->ops != &tls_stream_ops)
        return NULL;
    struct tls_conn *c = (struct tls_conn *)s;
    return br_ssl_engine_get_selected_protocol(&c->cc.eng);
}

int
tls_stream_resumed(const struct io_stream *s)
{
    if (s == NULL || s->ops != &tls_stream_ops)
        return 0;
    return ((const struct tls_conn *)s)->resumed;
}
