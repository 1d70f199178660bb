#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "log/log.h"
#include "tls/tls_int.h"

/* The record pump both roles share. BearSSL's engine is sans-I/O (records
 * in and out of its own buffer, plaintext in and out of the same), so the
 * only I/O is moving records between it and |s.inner|: the same code runs
 * over a socket, an lwIP connection or another TLS stream. The object is
 * the handshake handle first and, once done, the TLS stream.
 *
 * Reading the inner stream is on while the handshake runs, or while the
 * owner reads and the engine has room for records; otherwise it is off, so
 * a level-triggered inner (a socket) never spins while the engine is full. */

#define LINGER_MAX 10.0  /* s: the last records after close */

/* After our end of data, the close_notify waits until the peer has been
 * quiet for this long: most peers then close too, and the flow ends. */
#define QUIET_CLOSE 1.5

const char tls_closed_why[] = "tls: connection closed during handshake";

static const struct io_stream_ops tls_stream_ops;

#define CONN_OF(p, member) ((struct tls_conn *)((char *)(p) - offsetof(struct tls_conn, member)))

static ssize_t
fail_with(int err)
{
    errno = err;
    return -1;
}

static int
would_block(int e)
{
    return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

int
tls_conn_reason(struct tls_conn *c, int e, const char **why)
{
    int server = c->role->first_record != NULL;
    size_t seen = c->rec_have < sizeof(c->hdr) ? c->rec_have : sizeof(c->hdr);
    char text[128];
    const char *s;
    if (e == BR_ERR_OK) {
        *why = tls_closed_why;
        return ECONNRESET;
    }
    /* Which bytes came decides between "not TLS" and a TLS-level reason:
     * BearSSL reports a plain-text answer as a bad version (3), type or
     * length. */
    if ((e == BR_ERR_UNSUPPORTED_VERSION || e == BR_ERR_UNKNOWN_TYPE || e == BR_ERR_BAD_LENGTH ||
         e == BR_ERR_TOO_LARGE) &&
        seen > 0 && tls_bytes_not_tls(c->hdr, seen))
        s = server ? "the client did not speak TLS (got bytes that are not a TLS record: "
                     "plain HTTP to a TLS port?)"
                   : "the server did not speak TLS (got bytes that are not a TLS record: "
                     "is this a plain port?)";
    else
        s = tls_error_sentence(e, server, text, sizeof(text));
    if (s != NULL)
        snprintf(c->why, sizeof(c->why), "tls: %s", s);
    else
        snprintf(c->why, sizeof(c->why), "tls: handshake failed (BearSSL error %d)", e);
    *why = c->why;
    return EPROTO;
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

static void
conn_free(struct tls_conn *c)
{
    free(c->rec);
    c->rec = NULL;
    c->role->destroy(c);
}

/* 1 when a read() would return something other than EAGAIN by itself. */
static int
readable(const struct tls_conn *c)
{
    size_t len;
    if (c->err || c->ieof || (br_ssl_engine_current_state(c->eng) & BR_SSL_CLOSED))
        return 1;
    return br_ssl_engine_recvapp_buf(c->eng, &len) != NULL;
}

/* Reads the inner stream exactly when records are wanted and can be taken. */
static void
sync_reading(struct tls_conn *c)
{
    int want = (c->hs || c->reading) && !c->lingering && !c->err && !c->ieof &&
               (br_ssl_engine_current_state(c->eng) & BR_SSL_RECVREC) != 0;
    if (want && !c->inner_reading)
        io_read_start(c->s.inner);
    else if (!want && c->inner_reading)
        io_read_stop(c->s.inner);
    c->inner_reading = want;
}

/* Sends buffered records: 1 when none are left, 0 when the inner stream
 * is full (its on_drain follows), -1 on error (c->err). */
static int
send_records(struct tls_conn *c)
{
    unsigned char *buf;
    size_t len;
    if (c->wblocked)
        return 0;
    while ((buf = br_ssl_engine_sendrec_buf(c->eng, &len)) != NULL) {
        ssize_t n = io_write(c->s.inner, buf, len);
        if (n > 0) {
            br_ssl_engine_sendrec_ack(c->eng, (size_t)n);
            if ((size_t)n == len)
                continue;
        } else if (n < 0 && !would_block(errno)) {
            c->err = errno;
            return -1;
        }
        c->wblocked = 1;
        return 0;
    }
    return 1;
}

/* Reads from the inner stream into the engine; as io_read. */
static ssize_t
read_records(struct tls_conn *c)
{
    if (c->peek)
        return tls_conn_read_first(c);
    size_t len;
    unsigned char *buf = br_ssl_engine_recvrec_buf(c->eng, &len);
    if (buf == NULL)
        return fail_with(EAGAIN);
    ssize_t n;
    if (c->ahead_len > 0) {
        n = (ssize_t)(len < c->ahead_len ? len : c->ahead_len);
        memcpy(buf, c->ahead, (size_t)n);
        c->ahead_len -= (size_t)n;
        memmove(c->ahead, c->ahead + n, c->ahead_len);
    } else {
        /* BearSSL asks for a header, then for the body: reading the next
         * header with each body halves the reads. Every record has a body
         * after its header, so held bytes never wait for a readiness
         * callback that will not come. */
        struct iovec v[2] = {{buf, len}, {c->ahead, sizeof(c->ahead)}};
        n = io_readv(c->s.inner, v, 2);
        if (n > (ssize_t)len) {
            c->ahead_len = (size_t)n - len;
            n = (ssize_t)len;
        }
    }
    if (n > 0) {
        if (c->rec_have < sizeof(c->hdr)) { /* a client's first bytes (tls_conn_reason) */
            size_t k = sizeof(c->hdr) - c->rec_have < (size_t)n ? sizeof(c->hdr) - c->rec_have
                                                                : (size_t)n;
            memcpy(c->hdr + c->rec_have, buf, k);
            c->rec_have += k;
        }
        br_ssl_engine_recvrec_ack(c->eng, (size_t)n);
    }
    return n;
}

/* ---- handshake ---------------------------------------------------------- */

static const char *
suite_name(uint16_t id)
{
    switch (id) {
    case BR_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256:
        return "ECDHE-ECDSA-AES128-GCM-SHA256";
    case BR_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256:
        return "ECDHE-RSA-AES128-GCM-SHA256";
    case BR_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384:
        return "ECDHE-ECDSA-AES256-GCM-SHA384";
    case BR_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384:
        return "ECDHE-RSA-AES256-GCM-SHA384";
    case BR_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256:
        return "ECDHE-ECDSA-CHACHA20-POLY1305";
    case BR_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256:
        return "ECDHE-RSA-CHACHA20-POLY1305";
    case BR_TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256:
        return "ECDHE-RSA-AES128-SHA256";
    default:
        return "?";
    }
}

static double
hs_ms(const struct tls_conn *c)
{
    return (io_mono_now() - c->t0) * 1000;
}

static void
hs_fail(struct tls_conn *c, int err, const char *why)
{
    LOG_DEBUG("tls: %s handshake with '%s' failed after %.0f ms: %s", c->role->name,
              c->role->peer(c), hs_ms(c), why);
    c->role->failed(c, err);
    io_soon_cancel(c->s.loop, &c->kick);
    io_close(c->s.inner, 0);
    c->s.inner = NULL;
    c->cb(c->cb_arg, NULL, err, why);
    conn_free(c);
}

static void
hs_fail_errno(struct tls_conn *c, int err)
{
    if (err == ECONNRESET || err == EPIPE) {
        hs_fail(c, err, tls_closed_why);
        return;
    }
    snprintf(c->why, sizeof(c->why), "tls: %s during handshake", strerror(err));
    hs_fail(c, err, c->why);
}

static void
hs_done(struct tls_conn *c)
{
    br_ssl_session_parameters p;
    br_ssl_engine_get_session_parameters(c->eng, &p);
    /* No "resumed" getter in 0.6: a resumed session keeps its ID, a new
     * one gets a fresh random one. */
    c->resumed = c->offered_len != 0 && p.session_id_len == c->offered_len &&
                 memcmp(p.session_id, c->offered_id, c->offered_len) == 0;
    c->role->done(c, &p);
    if (log_threshold >= LOG_LEVEL_DEBUG) {
        const char *alpn = br_ssl_engine_get_selected_protocol(c->eng);
        LOG_DEBUG("tls: %s handshake with '%s' done in %.0f ms: TLS 1.2 %s, alpn %s, %s",
                  c->role->name, c->role->peer(c), hs_ms(c), suite_name(p.cipher_suite),
                  alpn ? alpn : "none", c->resumed ? "session resumed" : "new session");
    }
    explicit_bzero(&p, sizeof(p));
    c->hs = 0;
    c->s.ops = &tls_stream_ops;
    io_soon_cancel(c->s.loop, &c->kick);
    sync_reading(c);
    c->cb(c->cb_arg, &c->s, 0, NULL); /* may close the stream: last */
}

/* Moves records both ways until nothing moves, then waits for the inner
 * stream's callbacks. */
static void
hs_step(struct tls_conn *c)
{
    int wait_w, wait_r;
    if (c->start_err) {
        hs_fail(c, c->start_err, c->start_why);
        return;
    }
    for (;;) {
        unsigned st = br_ssl_engine_current_state(c->eng);
        if (st & BR_SSL_CLOSED) {
            const char *why;
            int err = c->role->reason(c, br_ssl_engine_last_error(c->eng), &why);
            hs_fail(c, err, why);
            return;
        }
        if (st & BR_SSL_SENDAPP) {
            hs_done(c);
            return;
        }
        wait_w = wait_r = 0;
        if (st & BR_SSL_SENDREC) {
            int r = send_records(c);
            if (r < 0) {
                hs_fail_errno(c, c->err);
                return;
            }
            if (r > 0)
                continue;
            wait_w = 1;
        }
        if (st & BR_SSL_RECVREC) {
            ssize_t n = read_records(c);
            if (n > 0)
                continue;
            if (n == 0 || !would_block(errno)) {
                hs_fail_errno(c, n == 0 ? ECONNRESET : errno);
                return;
            }
            wait_r = 1;
        }
        break;
    }
    if (!wait_w && !wait_r) { /* the engine wants nothing: it cannot progress */
        const char *why = NULL;
        int e = br_ssl_engine_last_error(c->eng);
        /* Two statements: the arguments' order of evaluation is unspecified. */
        int err = c->role->reason(c, e ? e : BR_ERR_BAD_STATE, &why);
        hs_fail(c, err, why);
        return;
    }
    sync_reading(c);
}

/* ---- the inner stream's callbacks and ours ----------------------------- */

/* Moves records in (and any answer out, e.g. to the peer's close_notify)
 * until the engine holds plaintext, waits, or fails (c->err). */
static void
pull(struct tls_conn *c)
{
    size_t len;
    while (!c->err && !c->ieof && br_ssl_engine_recvapp_buf(c->eng, &len) == NULL) {
        unsigned st = br_ssl_engine_current_state(c->eng);
        if (st & BR_SSL_CLOSED)
            return;
        if (st & BR_SSL_SENDREC) {
            int r = send_records(c);
            if (r < 0)
                return;
            if (r > 0)
                continue; /* the engine may have moved on */
        }
        if (!(st & BR_SSL_RECVREC))
            return; /* waits for that output: on_drain goes on */
        ssize_t n = read_records(c);
        if (n > 0)
            continue;
        if (n == 0) {
            c->ieof = 1;
            /* A FIN without close_notify may be a truncation attack;
             * after our own end, BearSSL drops data anyway. */
            if (!c->shut)
                c->err = ECONNRESET;
        } else if (!would_block(errno)) {
            c->err = errno;
        }
        return;
    }
}

/* The first handshake step; then the owner's on_readable while a read
 * would not say EAGAIN, and on_drain for a writer that waits for room when
 * an error came instead. */
static void
on_kick(void *arg)
{
    struct tls_conn *c = arg;
    if (c->hs) {
        hs_step(c);
        return;
    }
    int look = c->reading && c->s.on_readable != NULL && readable(c);
    if (c->err && c->want_drain && c->s.on_drain != NULL) {
        c->want_drain = 0;
        if (look)
            io_soon_arm(c->s.loop, &c->kick);
        c->s.on_drain(c->s.arg); /* may close the stream: last */
        return;
    }
    if (look) {
        io_soon_arm(c->s.loop, &c->kick); /* again, for bytes left after the call */
        c->s.on_readable(c->s.arg);       /* may close the stream: last */
    }
}

static void
on_inner_readable(void *arg)
{
    struct tls_conn *c = arg;
    if (c->hs) {
        hs_step(c);
        return;
    }
    if (c->reading)
        pull(c);
    sync_reading(c);
    on_kick(c);
}

static void finish_close(struct tls_conn *c);

static void
on_inner_drain(void *arg)
{
    struct tls_conn *c = arg;
    c->wblocked = 0;
    if (c->hs) {
        hs_step(c);
        return;
    }
    int r = send_records(c);
    if (c->lingering) {
        if (r != 0)
            finish_close(c);
        return;
    }
    if (r == 0)
        return;
    if (r > 0 && c->notified && !c->shut_done) {
        io_shutdown(c->s.inner);
        c->shut_done = 1;
    }
    /* The engine may read again (it waited for this output), or has
     * failed: the reader looks from the next iteration. */
    sync_reading(c);
    if (c->reading && readable(c))
        io_soon_arm(c->s.loop, &c->kick);
    if ((c->want_drain || r < 0) && c->s.on_drain != NULL) {
        c->want_drain = 0;
        c->s.on_drain(c->s.arg); /* may close the stream: last */
    }
}

static void
on_quiet(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct tls_conn *c = CONN_OF(w, quiet);
    ev_timer_stop(loop, w);
    if (c->notified || c->err)
        return;
    c->notified = 1;
    br_ssl_engine_close(c->eng);
    int r = send_records(c);
    if (r > 0) {
        io_shutdown(c->s.inner);
        c->shut_done = 1;
    } else if (r < 0 && (c->reading || c->want_drain)) {
        io_soon_arm(loop, &c->kick); /* the owner finds the error */
    }
}

static void
on_linger_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    finish_close(CONN_OF(w, linger));
}

/* ---- the stream ---------------------------------------------------------- */

static ssize_t no_plaintext(struct tls_conn *c);

static ssize_t
st_read(struct io_stream *s, void *out, size_t cap)
{
    struct tls_conn *c = (struct tls_conn *)s;
    size_t len;
    if (c->err)
        return fail_with(c->err);
    if (cap == 0)
        return 0; /* as read(2); BearSSL forbids empty acks */
    pull(c);
    unsigned char *buf = br_ssl_engine_recvapp_buf(c->eng, &len);
    if (buf != NULL) {
        size_t n = len < cap ? len : cap;
        memcpy(out, buf, n);
        br_ssl_engine_recvapp_ack(c->eng, n);
        if (c->shut && !c->shut_done)
            ev_timer_again(s->loop, &c->quiet); /* the answer is still coming */
        sync_reading(c); /* room for records again: the owner need not read on to EAGAIN */
        return (ssize_t)n;
    }
    return no_plaintext(c);
}

/* What a read that found no plaintext returns: 0 at the end, else -1
 * with errno (EAGAIN: the inner stream's callback brings more). */
static ssize_t
no_plaintext(struct tls_conn *c)
{
    struct io_stream *s = &c->s;
    if (br_ssl_engine_current_state(c->eng) & BR_SSL_CLOSED) {
        int e = br_ssl_engine_last_error(c->eng);
        if (e == BR_ERR_OK)
            return 0; /* close_notify seen */
        c->err = stream_errno(e);
    }
    if (c->err)
        return fail_with(c->err);
    if (c->ieof)
        return 0; /* after our shutdown: the end */
    io_soon_cancel(s->loop, &c->kick);
    sync_reading(c);
    return fail_with(EAGAIN);
}

/* The record's plaintext where BearSSL decrypted it: a relay writes it
 * on from there, with no copy into a buffer of its own. */
static int
st_peek(struct io_stream *s, struct iovec *iov, int max)
{
    struct tls_conn *c = (struct tls_conn *)s;
    size_t len;
    if (c->err)
        return (int)fail_with(c->err);
    if (max <= 0)
        return (int)fail_with(EINVAL);
    pull(c);
    unsigned char *buf = br_ssl_engine_recvapp_buf(c->eng, &len);
    if (buf != NULL) {
        iov[0] = (struct iovec){buf, len};
        return 1;
    }
    return (int)no_plaintext(c);
}

static void
st_consume(struct io_stream *s, size_t n)
{
    struct tls_conn *c = (struct tls_conn *)s;
    size_t len;
    if (n == 0 || br_ssl_engine_recvapp_buf(c->eng, &len) == NULL)
        return;
    br_ssl_engine_recvapp_ack(c->eng, n < len ? n : len);
    if (c->shut && !c->shut_done)
        ev_timer_again(s->loop, &c->quiet); /* the answer is still coming */
    sync_reading(c);
}

static ssize_t
st_writev(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    struct tls_conn *c = (struct tls_conn *)s;
    br_ssl_engine_context *eng = c->eng;
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
                /* A full record is waiting for the inner stream. */
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
    if (total < want)
        c->want_drain = 1; /* the inner stream's on_drain brings ours */
    if (total == 0 && want > 0)
        return fail_with(EAGAIN);
    return (ssize_t)total;
}

/* BearSSL 0.6 discards application data that arrives after its
 * close_notify went out, until the peer's close_notify: the TLS 1.2 close
 * is not a true half-close. So our end of data does not become a
 * close_notify at once (the peer's answer would be lost): it goes out
 * once the peer has sent nothing for QUIET_CLOSE seconds, or with
 * st_close. */
static int
st_shutdown(struct io_stream *s)
{
    struct tls_conn *c = (struct tls_conn *)s;
    if (c->err)
        return (int)fail_with(c->err);
    if (!c->shut) {
        c->shut = 1; /* no more writes */
        ev_timer_again(s->loop, &c->quiet);
    }
    return 0;
}

static void
st_read_start(struct io_stream *s)
{
    struct tls_conn *c = (struct tls_conn *)s;
    c->reading = 1;
    if (readable(c))
        io_soon_arm(s->loop, &c->kick);
    sync_reading(c);
}

static void
st_read_stop(struct io_stream *s)
{
    struct tls_conn *c = (struct tls_conn *)s;
    c->reading = 0;
    io_soon_cancel(s->loop, &c->kick);
    sync_reading(c);
}

static void
st_close(struct io_stream *s, int reset)
{
    struct tls_conn *c = (struct tls_conn *)s;
    io_soon_cancel(s->loop, &c->kick);
    ev_timer_stop(s->loop, &c->quiet);
    c->reading = 0;
    c->s.on_readable = c->s.on_drain = NULL;
    if (reset) {
        io_close(s->inner, 1);
        conn_free(c);
        return;
    }
    /* close_notify, best effort, so the peer keeps the session. */
    if (!c->err && !(br_ssl_engine_current_state(c->eng) & BR_SSL_CLOSED))
        br_ssl_engine_close(c->eng);
    if (!c->err && send_records(c) == 0) {
        /* Records the inner stream has not taken yet (the relay's last
         * bytes, the close_notify): sent in the background, for 10 s at
         * most. */
        c->lingering = 1;
        sync_reading(c);
        ev_timer_start(s->loop, &c->linger);
        return;
    }
    finish_close(c);
}

static void
finish_close(struct tls_conn *c)
{
    ev_timer_stop(c->s.loop, &c->linger);
    /* Unread input makes a socket's close send a RST that could overtake
     * the close_notify: drain what already arrived first. */
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
    .peek = st_peek,
    .consume = st_consume,
};

/* ---- set-up and queries -------------------------------------------------- */

void
tls_conn_start(struct tls_conn *c, const struct tls_conn_role *role, br_ssl_engine_context *eng,
               struct io_stream *inner, tls_handshake_cb cb, void *arg)
{
    c->role = role;
    c->eng = eng;
    c->cb = cb;
    c->cb_arg = arg;
    c->s.inner = inner;
    c->s.loop = inner->loop;
    c->hs = 1;
    c->t0 = io_mono_now();
    c->peek = role->first_record != NULL;
    io_soon_init(&c->kick, on_kick, c);
    ev_timer_init(&c->quiet, on_quiet, 0, QUIET_CLOSE);
    ev_timer_init(&c->linger, on_linger_timeout, LINGER_MAX, 0);
    /* Ours from now on, in a known state: not reading until wanted. */
    io_set_callbacks(inner, on_inner_readable, on_inner_drain, c);
    io_read_stop(inner);
    io_soon_arm(c->s.loop, &c->kick); /* the first step: never from inside this call */
}

void
tls_conn_start_fail(struct tls_conn *c, const char *why)
{
    c->start_err = EINVAL;
    c->start_why = why;
}

void
tls_handshake_cancel(struct tls_handshake *h)
{
    struct tls_conn *c = (struct tls_conn *)h;
    io_soon_cancel(c->s.loop, &c->kick);
    io_close(c->s.inner, 0);
    conn_free(c);
}

int
tls_aes_first(void)
{
    return br_aes_x86ni_ctr_get_vtable() != NULL;
}

struct tls_conn *
tls_conn_of(const struct io_stream *s)
{
    return s != NULL && s->ops == &tls_stream_ops ? (struct tls_conn *)s : NULL;
}

const char *
tls_stream_alpn(const struct io_stream *s)
{
    struct tls_conn *c = tls_conn_of(s);
    return c != NULL ? br_ssl_engine_get_selected_protocol(c->eng) : NULL;
}

int
tls_stream_resumed(const struct io_stream *s)
{
    struct tls_conn *c = tls_conn_of(s);
    return c != NULL && c->resumed;
}
