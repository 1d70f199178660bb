#include "outbound/ss_codec.h"

#include <string.h>

size_t
ss_key_len(enum outbound_ss_cipher c)
{
    return c == OUTBOUND_SS_AES_128_GCM ? 16 : 32;
}

enum tls_aead_alg
ss_alg(enum outbound_ss_cipher c)
{
    switch (c) {
    case OUTBOUND_SS_AES_128_GCM:
        return TLS_AEAD_AES_128_GCM;
    case OUTBOUND_SS_AES_256_GCM:
        return TLS_AEAD_AES_256_GCM;
    default:
        return TLS_AEAD_CHACHA20_POLY1305;
    }
}

void
ss_dir_init(struct ss_dir *d, enum outbound_ss_cipher c, const uint8_t *key, const uint8_t *salt)
{
    uint8_t sub[32];
    size_t n = ss_key_len(c);

    tls_hkdf_sha1(key, n, salt, n, "ss-subkey", sub, n);
    tls_aead_init(&d->aead, ss_alg(c), sub);
    memset(d->nonce, 0, sizeof(d->nonce));
    memset(sub, 0, sizeof(sub));
}

static inline void
nonce_next(uint8_t n[TLS_AEAD_NONCE_LEN])
{
    for (int i = 0; i < TLS_AEAD_NONCE_LEN && ++n[i] == 0; i++)
        ;
}

void
ss_encoder_init(struct ss_encoder *e, enum outbound_ss_cipher c, const uint8_t *key,
                const uint8_t *salt, const uint8_t *prefix, size_t prefix_len)
{
    memset(e, 0, offsetof(struct ss_encoder, prefix));
    e->salt_len = ss_key_len(c);
    if (salt != NULL)
        memcpy(e->salt, salt, e->salt_len);
    else
        tls_random(e->salt, e->salt_len);
    ss_dir_init(&e->dir, c, key, e->salt);
    if (prefix_len > sizeof(e->prefix))
        prefix_len = sizeof(e->prefix);
    if (prefix_len > 0)
        memcpy(e->prefix, prefix, prefix_len);
    e->prefix_len = prefix_len;
}

/* Where the next plaintext byte comes from: iov[i] at off. */
struct gather {
    const struct iovec *iov;
    int i;
    size_t off;
};

static void
gather(struct gather *g, uint8_t *p, size_t k)
{
    while (k > 0) {
        size_t m = g->iov[g->i].iov_len - g->off;
        if (m > k)
            m = k;
        memcpy(p, (const uint8_t *)g->iov[g->i].iov_base + g->off, m);
        p += m;
        k -= m;
        g->off += m;
        if (g->off == g->iov[g->i].iov_len) {
            g->i++;
            g->off = 0;
        }
    }
}

/* Seals a chunk of |n| payload bytes: the |have| already at chunk +
 * SS_CHUNK_HDR, then n - have gathered from |g|. With GCM each step's
 * bytes are copied in just before they are sealed, so the copy, CTR and
 * GHASH passes all find them in L1. */
static void
seal_chunk(struct ss_dir *d, uint8_t *chunk, size_t n, size_t have, struct gather *g)
{
    uint8_t *p = chunk + SS_CHUNK_HDR;

    chunk[0] = (uint8_t)(n >> 8);
    chunk[1] = (uint8_t)n;
    tls_aead_seal(&d->aead, d->nonce, chunk, 2, chunk + 2);
    nonce_next(d->nonce);
    if (!tls_aead_stepwise(&d->aead) || n <= 16) {
        gather(g, p + have, n - have);
        tls_aead_seal(&d->aead, d->nonce, p, n, p + n);
    } else {
        struct tls_aead_steps st;
        tls_aead_begin(&d->aead, &st, d->nonce);
        for (size_t off = 0; off < n; off += TLS_AEAD_STEP) {
            size_t end = n - off < TLS_AEAD_STEP ? n : off + TLS_AEAD_STEP;
            if (end > have) {
                gather(g, p + have, end - have);
                have = end;
            }
            tls_aead_seal_step(&d->aead, &st, p + off, end - off);
        }
        tls_aead_end(&d->aead, &st, p + n);
    }
    nonce_next(d->nonce);
}

size_t
ss_encoder_seal(struct ss_encoder *e, uint8_t *out, size_t cap, const struct iovec *iov,
                int iovcnt, size_t *taken)
{
    size_t w = 0, left = 0;
    struct gather g = {iov, 0, 0};

    for (int k = 0; k < iovcnt; k++)
        left += iov[k].iov_len;
    *taken = 0;
    if (!e->started) {
        if (cap < e->salt_len + SS_CHUNK_OVERHEAD + (left > 0 ? 1 : 0) + e->prefix_len)
            return 0;
        memcpy(out, e->salt, e->salt_len);
        w = e->salt_len;
        e->started = 1;
    }
    while ((left > 0 || e->prefix_len > 0) &&
           cap - w >= SS_CHUNK_OVERHEAD + e->prefix_len + (left > 0 ? 1 : 0)) {
        uint8_t *chunk = out + w;
        size_t n = cap - w - SS_CHUNK_OVERHEAD, pre = e->prefix_len;

        if (n > SS_PAYLOAD_MAX)
            n = SS_PAYLOAD_MAX;
        if (n > pre + left)
            n = pre + left;
        memcpy(chunk + SS_CHUNK_HDR, e->prefix, pre);
        e->prefix_len = 0;
        left -= n - pre;
        *taken += n - pre;
        /* Gathered straight into the chunk, which is sealed in place. */
        seal_chunk(&e->dir, chunk, n, pre, &g);
        w += n + SS_CHUNK_OVERHEAD;
    }
    return w;
}

void
ss_decoder_init(struct ss_decoder *d, enum outbound_ss_cipher c, const uint8_t *key)
{
    memset(d, 0, sizeof(*d));
    d->cipher = c;
    d->salt_len = ss_key_len(c);
    memcpy(d->key, key, d->salt_len);
}

/* Bytes at b[0] then b[1]: a ring buffer's two spans. */
struct spans {
    uint8_t *b[2];
    size_t n[2];
};

/* Copies |k| bytes at |off| out of (|in| 0) or into |sp|. */
static void
spans_copy(const struct spans *sp, size_t off, uint8_t *x, size_t k, int in)
{
    for (int i = 0; i < 2 && k > 0; i++) {
        if (off >= sp->n[i]) {
            off -= sp->n[i];
            continue;
        }
        size_t m = sp->n[i] - off < k ? sp->n[i] - off : k;
        if (in)
            memcpy(sp->b[i] + off, x, m);
        else
            memcpy(x, sp->b[i] + off, m);
        x += m;
        k -= m;
        off = 0;
    }
}

/* The pieces of |sp| over [off, off + k): their count (0-2). */
static int
spans_sub(const struct spans *sp, size_t off, size_t k, uint8_t *b[2], size_t n[2])
{
    int c = 0;

    for (int i = 0; i < 2 && k > 0; i++) {
        if (off >= sp->n[i]) {
            off -= sp->n[i];
            continue;
        }
        size_t m = sp->n[i] - off < k ? sp->n[i] - off : k;
        b[c] = sp->b[i] + off;
        n[c++] = m;
        k -= m;
        off = 0;
    }
    return c;
}

ssize_t
ss_decoder_next2(struct ss_decoder *d, uint8_t *b0, size_t n0, uint8_t *b1, size_t n1,
                 size_t *plen)
{
    const struct spans sp = {{b0, b1}, {n0, b1 != NULL ? n1 : 0}};
    size_t len = sp.n[0] + sp.n[1], n;
    uint8_t tmp[SS_SALT_MAX > SS_CHUNK_HDR ? SS_SALT_MAX : SS_CHUNK_HDR];

    *plen = 0;
    if (d->failed)
        return -1;
    if (!d->have_salt) {
        if (len < d->salt_len)
            return 0;
        spans_copy(&sp, 0, tmp, d->salt_len, 0);
        ss_dir_init(&d->dir, d->cipher, d->key, tmp);
        d->have_salt = 1;
        return (ssize_t)d->salt_len;
    }
    if (!d->have_len) {
        if (len < SS_CHUNK_HDR)
            return 0;
        /* 18 bytes: opened in a copy, the clear length written back. */
        spans_copy(&sp, 0, tmp, SS_CHUNK_HDR, 0);
        if (tls_aead_open(&d->dir.aead, d->dir.nonce, tmp, 2, tmp + 2) != 0)
            goto fail;
        nonce_next(d->dir.nonce);
        if (ss_chunk_len(tmp) > SS_PAYLOAD_MAX)
            goto fail;
        spans_copy(&sp, 0, tmp, 2, 1);
        d->have_len = 1;
    }
    spans_copy(&sp, 0, tmp, 2, 0);
    n = ss_chunk_len(tmp);
    if (len < n + SS_CHUNK_OVERHEAD)
        return 0;
    uint8_t *pb[2], tag[TLS_AEAD_TAG_LEN];
    size_t pn[2];
    int pc = spans_sub(&sp, SS_CHUNK_HDR, n, pb, pn);
    spans_copy(&sp, SS_CHUNK_HDR + n, tag, sizeof(tag), 0);
    if (tls_aead_openv(&d->dir.aead, d->dir.nonce, pb, pn, pc, tag) != 0)
        goto fail;
    nonce_next(d->dir.nonce);
    d->have_len = 0;
    *plen = n;
    return (ssize_t)(n + SS_CHUNK_OVERHEAD);
fail:
    d->failed = 1;
    return -1;
}

ssize_t
ss_decoder_next(struct ss_decoder *d, uint8_t *buf, size_t len, size_t *plen)
{
    return ss_decoder_next2(d, buf, len, NULL, 0, plen);
}
