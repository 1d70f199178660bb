#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/io.h"
#include "outbound/outbound.h"
#include "outbound/proxy.h"
#include "outbound/ss_codec.h"

/* The Shadowsocks stream: plaintext in, chunks sealed straight into one
 * output buffer and sent from there; ciphertext received into a ring and
 * opened in place, so each byte is copied once per direction (the
 * caller's iovec into a chunk, an opened chunk into the caller's buffer,
 * or none: peek hands the opened payload out where it lies) besides the
 * crypto itself. The ring never moves bytes: a chunk that runs past its
 * end continues at its start and is opened in its two pieces. */

/* The ring: ~4 chunks per recv when the reader keeps up; a power of two
 * (positions are byte counts, wrapped by a mask). */
#define IN_CAP 65536
#define IN_MASK (IN_CAP - 1)
_Static_assert((IN_CAP & IN_MASK) == 0 && IN_CAP >= 2 * SS_CHUNK_MAX, "IN_CAP");
/* Four chunks: the 64 KiB a relay hands over per writev is sealed and
 * sent at once, and a slow socket holds the writer back only past that.
 * With IN_CAP, ~128 KiB per stream. */
#define OUT_CAP (SS_SALT_MAX + SS_ADDR_MAX + 4 * SS_CHUNK_MAX)
/* No chunk smaller than this is cut for lack of room (34 bytes of
 * overhead each); a smaller write still gets its own chunk. */
#define SEAL_MIN 4096
/* proxy.h: the header goes alone when nothing is written this soon. */
#define HEADER_DELAY 0.010
/* Seconds without the server's bytes after our end of data before the FIN. */
#define SS_QUIET_FIN 1.5

struct ss_stream {
    struct io_stream base; /* base.inner: the connection to the server */
    ev_timer hdr;
    struct io_soon kick;   /* on_readable for opened bytes the owner left */
    int reading;
    int err;         /* sticky errno: every later read/writev fails with it */
    int blocked;     /* a writev failed with EAGAIN: on_drain is owed */
    int shut, shut_done, eof;
    int closing;     /* closed by the owner; the last sealed bytes still go out */
    int fin_due;     /* the FIN may go once the buffer is out */
    ev_timer quiet;  /* after shutdown: the FIN waits for the server to go quiet */
    /* outbound_ss_watch (env NULL: not watched): armed when the request
     * goes out, stopped by the first byte back. */
    ev_timer silent;
    const struct outbound_env *env;
    const char *name;
    double deadline, sent_at;
    int armed, answered, reported;
    struct ss_encoder enc;
    struct ss_decoder dec;
    /* out[off, end): sealed bytes not yet sent. */
    size_t out_off, out_end;
    /* Ring positions (byte counts since the start; in[pos & IN_MASK]):
     * [.., dec) opened chunks, [dec, end) ciphertext not yet a whole
     * chunk. The reader walks the opened chunks: the payload at cur has
     * cur_left bytes, the next chunk starts at hd; plain counts them all.
     * Bytes before the reader's position are free. */
    size_t in_dec, in_end, hd, cur, cur_left, plain;
    uint8_t out[OUT_CAP];
    uint8_t in[IN_CAP];
};

#define SS(s) ((struct ss_stream *)(s))

static void
fail(struct ss_stream *s, int err)
{
    if (s->err == 0)
        s->err = err;
    ev_timer_stop(s->base.loop, &s->hdr);
}

/* Sends what the inner stream takes; it calls on_drain when it can take
 * more. 0, or -1 after a hard error (kept in err). */
static int
flush(struct ss_stream *s)
{
    while (s->out_off < s->out_end) {
        size_t want = s->out_end - s->out_off;
        ssize_t n = io_write(s->base.inner, s->out + s->out_off, want);
        if (n < 0 && errno == EAGAIN)
            break;
        if (n < 0) {
            fail(s, errno);
            return -1;
        }
        s->out_off += (size_t)n;
        if ((size_t)n < want)
            break; /* the socket buffer is full: skip the EAGAIN round trip */
    }
    if (s->out_off < s->out_end)
        return 0;
    s->out_off = s->out_end = 0;
    if (s->fin_due && !s->shut_done) {
        s->shut_done = 1;
        if (io_shutdown(s->base.inner) != 0) {
            fail(s, errno);
            return -1;
        }
    }
    return 0;
}

/* Free bytes at the end of out, moving unsent bytes to the front when
 * the tail is too short for a whole chunk. */
static size_t
out_room(struct ss_stream *s)
{
    if (OUT_CAP - s->out_end < SS_CHUNK_MAX && s->out_off > 0) {
        memmove(s->out, s->out + s->out_off, s->out_end - s->out_off);
        s->out_end -= s->out_off;
        s->out_off = 0;
    }
    return OUT_CAP - s->out_end;
}

/* Room a write of |total| bytes needs before it is worth sealing. */
static size_t
out_need(const struct ss_stream *s, size_t total)
{
    size_t need = SS_CHUNK_OVERHEAD + (total < SEAL_MIN ? total : SEAL_MIN) + s->enc.prefix_len;
    return s->enc.started ? need : need + s->enc.salt_len;
}

static void finish_close(struct ss_stream *s);

/* The request is sealed: the server owes a byte. Not the header alone: a
 * browser's preconnected socket may stay quiet for long, and a server
 * that speaks first would answer a right key at once anyway. */
static void
arm_watch(struct ss_stream *s)
{
    if (s->env == NULL || s->armed)
        return;
    s->armed = 1;
    s->sent_at = io_mono_now();
    ev_timer_set(&s->silent, s->deadline, 0);
    ev_timer_start(s->base.loop, &s->silent);
}

static void
on_silent(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct ss_stream *s = (struct ss_stream *)((char *)w - offsetof(struct ss_stream, silent));

    s->reported = 1; /* the flow goes on: a slow server may answer yet */
    outbound_silent_report(s->env, s->name, s->deadline, s->sent_at);
}

static void
answered(struct ss_stream *s)
{
    s->answered = 1;
    ev_timer_stop(s->base.loop, &s->silent);
    outbound_silent_answered(s->env, s->name, io_mono_now() - s->sent_at, s->reported);
}

static void
on_inner_drain(void *arg)
{
    struct ss_stream *s = arg;

    if (s->closing) {
        if (flush(s) != 0 || s->out_off == s->out_end)
            finish_close(s);
        return;
    }
    if (flush(s) != 0 || (s->blocked && out_room(s) >= SS_CHUNK_MAX)) {
        s->blocked = 0;
        if (s->base.on_drain != NULL)
            s->base.on_drain(s->base.arg); /* may close the stream */
    }
}

/* Seals the address header alone (no payload came in time, or a shutdown
 * before any): the server must learn the destination either way. */
static void
send_header(struct ss_stream *s)
{
    size_t taken;

    ev_timer_stop(s->base.loop, &s->hdr);
    if (s->enc.started)
        return;
    s->out_end += ss_encoder_seal(&s->enc, s->out + s->out_end, out_room(s), NULL, 0, &taken);
    flush(s);
}

static void
on_header_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct ss_stream *s = (struct ss_stream *)((char *)w - offsetof(struct ss_stream, hdr));

    if (s->closing) { /* the linger deadline: give up on the rest */
        finish_close(s);
        return;
    }
    send_header(s);
    if (s->err != 0 && s->base.on_drain != NULL)
        s->base.on_drain(s->base.arg);
}

static ssize_t
ss_writev(struct io_stream *base, const struct iovec *iov, int iovcnt)
{
    struct ss_stream *s = SS(base);
    size_t total = 0, taken, room;

    if (s->err != 0 || s->shut) {
        errno = s->err != 0 ? s->err : EPIPE;
        return -1;
    }
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (total == 0)
        return 0;
    ev_timer_stop(base->loop, &s->hdr);
    room = out_room(s);
    if (room < out_need(s, total)) {
        if (flush(s) != 0) {
            errno = s->err;
            return -1;
        }
        room = out_room(s);
        if (room < out_need(s, total)) {
            s->blocked = 1;
            errno = EAGAIN;
            return -1;
        }
    }
    s->blocked = 0;
    s->out_end += ss_encoder_seal(&s->enc, s->out + s->out_end, room, iov, iovcnt, &taken);
    arm_watch(s);
    if (flush(s) != 0) {
        errno = s->err;
        return -1;
    }
    return (ssize_t)taken;
}

/* The chunk length at ring position |pos| (opened: in clear). */
static size_t
ring_chunk_len(const struct ss_stream *s, size_t pos)
{
    return (size_t)s->in[pos & IN_MASK] << 8 | s->in[(pos + 1) & IN_MASK];
}

/* The reader's place in the opened chunks. */
struct walk {
    size_t hd, cur, cur_left;
};

/* Moves |w| past |len| payload bytes, copying them to |buf| (NULL: not),
 * or filling up to |max| iovecs over them (|iov| NULL: not). Returns the
 * bytes passed; |*niov| the iovecs filled. */
static size_t
walk(struct ss_stream *s, struct walk *w, uint8_t *buf, size_t len, struct iovec *iov,
     int max, int *niov)
{
    size_t got = 0;
    int k = 0;

    while (got < len) {
        if (w->cur_left == 0) {
            if (w->hd >= s->in_dec)
                break;
            w->cur = w->hd + SS_CHUNK_HDR;
            w->cur_left = ring_chunk_len(s, w->hd);
            w->hd = w->cur + w->cur_left + TLS_AEAD_TAG_LEN;
            continue;
        }
        size_t at = w->cur & IN_MASK, m = len - got < w->cur_left ? len - got : w->cur_left;
        if (m > IN_CAP - at)
            m = IN_CAP - at; /* up to the ring's end; the rest next round */
        if (iov != NULL) {
            if (k == max)
                break;
            iov[k++] = (struct iovec){s->in + at, m};
        }
        if (buf != NULL)
            memcpy(buf + got, s->in + at, m);
        got += m;
        w->cur += m;
        w->cur_left -= m;
    }
    if (niov != NULL)
        *niov = k;
    return got;
}

/* Drops |n| opened payload bytes, the reader's; the answer is still coming. */
static void
taken(struct ss_stream *s, const struct walk *w, size_t n)
{
    s->hd = w->hd;
    s->cur = w->cur;
    s->cur_left = w->cur_left;
    s->plain -= n;
    if (n > 0 && s->shut && !s->fin_due)
        ev_timer_again(s->base.loop, &s->quiet);
}

/* Reads into the free part of the ring: its two spans at once. As
 * io_read. */
static ssize_t
recv_more(struct ss_stream *s)
{
    size_t tail = s->cur_left > 0 ? s->cur : s->hd;
    size_t room = IN_CAP - (s->in_end - tail), at = s->in_end & IN_MASK;
    size_t first = room < IN_CAP - at ? room : IN_CAP - at;
    struct iovec v[2] = {{s->in + at, first}, {s->in, room - first}};

    ssize_t n = io_readv(s->base.inner, v, room > first ? 2 : 1);
    if (n > 0)
        s->in_end += (size_t)n;
    return n;
}

static int
open_chunks(struct ss_stream *s)
{
    for (;;) {
        size_t plen, at = s->in_dec & IN_MASK, have = s->in_end - s->in_dec;
        size_t n0 = have < IN_CAP - at ? have : IN_CAP - at;
        int salt = !s->dec.have_salt;
        ssize_t r = ss_decoder_next2(&s->dec, s->in + at, n0, s->in, have - n0, &plen);
        if (r < 0) {
            fail(s, EBADMSG);
            return -1;
        }
        if (r == 0)
            return 0;
        s->in_dec += (size_t)r;
        if (salt)
            s->hd = s->in_dec; /* nothing precedes the salt */
        s->plain += plen;
    }
}

/* Receives and opens until payload is there: 1, 0 at the end of data,
 * or -1 with errno (EAGAIN: the inner stream calls on_readable). */
static int
fill(struct ss_stream *s)
{
    struct io_stream *base = &s->base;

    for (;;) {
        /* Payload opened before a send failed is still delivered; nothing
         * is after a failed tag. */
        if (s->err != 0 && (s->plain == 0 || s->err == EBADMSG)) {
            errno = s->err;
            return -1;
        }
        if (s->plain > 0)
            return 1;
        /* Only empty chunks can remain unwalked: skip them. */
        s->hd = s->in_dec;
        s->cur_left = 0;
        if (s->eof)
            return 0;
        ssize_t n = recv_more(s);
        if (n < 0) {
            if (errno == EAGAIN)
                io_soon_cancel(base->loop, &s->kick); /* all read: the inner stream calls */
            return -1;
        }
        if (n == 0) {
            /* A salt or chunk cut short is a truncated stream, not an end. */
            if (s->in_end > s->in_dec || s->dec.have_len) {
                fail(s, EPROTO);
                continue;
            }
            s->eof = 1;
            return 0;
        }
        if (s->armed && !s->answered)
            answered(s);
        open_chunks(s); /* a failure shows at the loop's top */
    }
}

static ssize_t
ss_read(struct io_stream *base, void *buf, size_t len)
{
    struct ss_stream *s = SS(base);

    if (len == 0)
        return 0;
    int r = fill(s);
    if (r <= 0)
        return r;
    struct walk w = {s->hd, s->cur, s->cur_left};
    size_t got = walk(s, &w, buf, len, NULL, 0, NULL);
    taken(s, &w, got);
    return (ssize_t)got;
}

/* The opened payload where it lies in the ring: no copy for a relay that
 * writes it on at once. */
static int
ss_peek(struct io_stream *base, struct iovec *iov, int max)
{
    struct ss_stream *s = SS(base);
    int n;

    if (max <= 0) {
        errno = EINVAL;
        return -1;
    }
    int r = fill(s);
    if (r <= 0)
        return r;
    struct walk w = {s->hd, s->cur, s->cur_left};
    walk(s, &w, NULL, s->plain, iov, max, &n);
    return n;
}

static void
ss_consume(struct io_stream *base, size_t n)
{
    struct ss_stream *s = SS(base);
    struct walk w = {s->hd, s->cur, s->cur_left};

    taken(s, &w, walk(s, &w, NULL, n < s->plain ? n : s->plain, NULL, 0, NULL));
}

static int
ss_shutdown(struct io_stream *base)
{
    struct ss_stream *s = SS(base);

    if (s->err != 0) {
        errno = s->err;
        return -1;
    }
    if (s->shut)
        return 0;
    s->shut = 1;
    /* ss-server ends both directions at our FIN, cutting the answer to what
     * was just sent: the FIN waits until the server has been quiet. */
    ev_timer_again(base->loop, &s->quiet);
    send_header(s);
    if (flush(s) != 0) {
        errno = s->err;
        return -1;
    }
    return 0;
}

/* Opened bytes, or a failure, wait to be read. */
static int
readable(const struct ss_stream *s)
{
    return s->plain > 0 || s->err != 0 || s->eof;
}

static void
on_kick(void *arg)
{
    struct ss_stream *s = arg;

    if (!s->reading || s->base.on_readable == NULL)
        return;
    /* Armed again first, as in on_inner_readable: the owner may stop early
     * once more with bytes opened (a read that finds none cancels it). */
    io_soon_arm(s->base.loop, &s->kick);
    s->base.on_readable(s->base.arg);
}

static void
on_inner_readable(void *arg)
{
    struct ss_stream *s = arg;

    if (s->closing)
        return;
    /* Armed first: the owner may stop with bytes opened, or close. */
    io_soon_arm(s->base.loop, &s->kick);
    if (s->base.on_readable != NULL)
        s->base.on_readable(s->base.arg);
}

static void
ss_read_start(struct io_stream *base)
{
    struct ss_stream *s = SS(base);

    s->reading = 1;
    io_read_start(base->inner);
    if (readable(s))
        io_soon_arm(base->loop, &s->kick);
}

static void
ss_read_stop(struct io_stream *base)
{
    struct ss_stream *s = SS(base);

    s->reading = 0;
    io_read_stop(base->inner);
    io_soon_cancel(base->loop, &s->kick);
}

static void
on_quiet(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct ss_stream *s = (struct ss_stream *)((char *)w - offsetof(struct ss_stream, quiet));

    ev_timer_stop(loop, w);
    s->fin_due = 1;
    if (flush(s) != 0 && s->base.on_drain != NULL)
        s->base.on_drain(s->base.arg);
}

static void
finish_close(struct ss_stream *s)
{
    ev_timer_stop(s->base.loop, &s->silent);
    ev_timer_stop(s->base.loop, &s->quiet);
    ev_timer_stop(s->base.loop, &s->hdr);
    io_soon_cancel(s->base.loop, &s->kick);
    io_close(s->base.inner, 0);
    free(s);
}

static void
ss_close(struct io_stream *base, int reset)
{
    struct ss_stream *s = SS(base);

    ev_timer_stop(base->loop, &s->hdr);
    ev_timer_stop(base->loop, &s->quiet);
    ev_timer_stop(base->loop, &s->silent); /* env may go with the owner */
    io_soon_cancel(base->loop, &s->kick);
    s->fin_due = 1;
    if (reset) {
        io_close(base->inner, 1);
        free(s);
        return;
    }
    if (s->err == 0 && s->out_off < s->out_end && flush(s) == 0 && s->out_off < s->out_end) {
        /* A relay's last bytes the socket has not taken yet: sent in the
         * background, for 10 s at most (the header timer is reused). */
        s->closing = 1;
        s->base.on_drain = NULL;
        s->base.on_readable = NULL;
        io_read_stop(base->inner);
        ev_timer_set(&s->hdr, 10.0, 0);
        ev_timer_start(base->loop, &s->hdr);
        return;
    }
    finish_close(s);
}

static const struct io_stream_ops ss_ops = {
    .name = "shadowsocks",
    .read = ss_read,
    .writev = ss_writev,
    .shutdown = ss_shutdown,
    .read_start = ss_read_start,
    .read_stop = ss_read_stop,
    .close = ss_close,
    .peek = ss_peek,
    .consume = ss_consume,
};

struct io_stream *
outbound_ss_stream(struct io_stream *inner, const struct outbound_proxy *p,
                   const struct flow_addr *dst)
{
    uint8_t hdr[SS_ADDR_MAX];
    int hlen = outbound_addr_write(hdr, sizeof(hdr), dst);
    struct ev_loop *loop = inner->loop;
    struct ss_stream *s;

    /* The buffers are written before they are read: no need to zero them. */
    if (hlen < 0 || (s = malloc(sizeof(*s))) == NULL) {
        io_close(inner, 0);
        return NULL;
    }
    memset(s, 0, offsetof(struct ss_stream, out));
    s->base.ops = &ss_ops;
    s->base.inner = inner;
    s->base.loop = loop;
    io_set_callbacks(inner, on_inner_readable, on_inner_drain, s);
    io_soon_init(&s->kick, on_kick, s);
    ss_encoder_init(&s->enc, p->cipher, p->key, NULL, hdr, (size_t)hlen);
    ss_decoder_init(&s->dec, p->cipher, p->key);
    ev_timer_init(&s->hdr, on_header_timer, HEADER_DELAY, 0.);
    ev_init(&s->quiet, on_quiet);
    s->quiet.repeat = SS_QUIET_FIN;
    ev_init(&s->silent, on_silent);
    ev_timer_start(loop, &s->hdr);
    return &s->base;
}

void
outbound_ss_watch(struct io_stream *base, const struct outbound_env *env, const char *name,
                  double deadline)
{
    struct ss_stream *s = SS(base);

    s->env = env;
    s->name = name;
    s->deadline = deadline;
}

ssize_t
outbound_ss_udp_seal(const struct outbound_proxy *p, const struct flow_addr *dst,
                     const uint8_t *payload, size_t len, uint8_t *out, size_t cap)
{
    size_t salt_len = ss_key_len(p->cipher), room;
    uint8_t hdr[SS_ADDR_MAX];
    int alen = outbound_addr_write(hdr, sizeof(hdr), dst);
    struct ss_dir d;

    if (alen < 0 || cap < salt_len + TLS_AEAD_TAG_LEN + (size_t)alen)
        return -1;
    room = cap - salt_len - TLS_AEAD_TAG_LEN - (size_t)alen;
    if (len > room)
        return -1;
    uint8_t *body = out + salt_len;
    size_t blen = (size_t)alen + len;
    /* |payload| may already sit in |out|: move it before anything else
     * is written there. */
    memmove(body + alen, payload, len);
    memcpy(body, hdr, (size_t)alen);
    tls_random(out, salt_len);
    ss_dir_init(&d, p->cipher, p->key, out);
    tls_aead_seal(&d.aead, d.nonce, body, blen, body + blen);
    return (ssize_t)(salt_len + blen + TLS_AEAD_TAG_LEN);
}

ssize_t
outbound_ss_udp_open(const struct outbound_proxy *p, uint8_t *in, size_t len,
                     struct flow_addr *from, size_t *payload_len)
{
    size_t salt_len = ss_key_len(p->cipher);
    struct ss_dir d;

    if (len < salt_len + TLS_AEAD_TAG_LEN)
        return -1;
    uint8_t *body = in + salt_len;
    size_t blen = len - salt_len - TLS_AEAD_TAG_LEN;
    ss_dir_init(&d, p->cipher, p->key, in);
    if (tls_aead_open(&d.aead, d.nonce, body, blen, body + blen) != 0)
        return -1;
    int alen = outbound_addr_parse(body, blen, from);
    if (alen <= 0)
        return -1;
    *payload_len = blen - (size_t)alen;
    return (ssize_t)(salt_len + (size_t)alen);
}

int
outbound_ss_setup(struct outbound_proxy *p, const char *cipher, const char *password)
{
    static const struct {
        const char *name;
        enum outbound_ss_cipher c;
    } names[] = {
        {"aes-128-gcm", OUTBOUND_SS_AES_128_GCM},
        {"aes-256-gcm", OUTBOUND_SS_AES_256_GCM},
        {"chacha20-ietf-poly1305", OUTBOUND_SS_CHACHA20_POLY1305},
        {"chacha20-poly1305", OUTBOUND_SS_CHACHA20_POLY1305},
    };
    size_t i, n = sizeof(names) / sizeof(names[0]), plen = strlen(password), have = 0;
    uint8_t d[16], *buf;

    for (i = 0; i < n && strcmp(names[i].name, cipher) != 0; i++)
        ;
    if (i == n || (buf = malloc(16 + plen)) == NULL)
        return -1;
    p->cipher = names[i].c;
    p->key_len = ss_key_len(p->cipher);
    /* EVP_BytesToKey(MD5, no salt, 1 round): D1 = MD5(pw), Di = MD5(Di-1 || pw). */
    memcpy(buf + 16, password, plen);
    tls_md5(buf + 16, plen, d);
    for (;;) {
        size_t k = p->key_len - have < 16 ? p->key_len - have : 16;
        memcpy(p->key + have, d, k);
        have += k;
        if (have == p->key_len)
            break;
        memcpy(buf, d, 16);
        tls_md5(buf, 16 + plen, d);
    }
    free(buf);
    return 0;
}
