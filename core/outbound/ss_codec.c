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

/* Seals the |n| plaintext bytes already at chunk + SS_CHUNK_HDR. */
static void
seal_chunk(struct ss_dir *d, uint8_t *chunk, size_t n)
{
    chunk[0] = (uint8_t)(n >> 8);
    chunk[1] = (uint8_t)n;
    tls_aead_seal(&d->aead, d->nonce, chunk, 2, chunk + 2);
    nonce_next(d->nonce);
    tls_aead_seal(&d->aead, d->nonce, chunk + SS_CHUNK_HDR, n, chunk + SS_CHUNK_HDR + n);
    nonce_next(d->nonce);
}

size_t
ss_encoder_seal(struct ss_encoder *e, uint8_t *out, size_t cap, const struct iovec *iov,
                int iovcnt, size_t *taken)
{
    size_t w = 0, left = 0, iov_off = 0;
    int i = 0;

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
        uint8_t *chunk = out + w, *p = chunk + SS_CHUNK_HDR;
        size_t n = cap - w - SS_CHUNK_OVERHEAD, body;

        if (n > SS_PAYLOAD_MAX)
            n = SS_PAYLOAD_MAX;
        if (n > e->prefix_len + left)
            n = e->prefix_len + left;
        memcpy(p, e->prefix, e->prefix_len);
        body = n - e->prefix_len;
        p += e->prefix_len;
        e->prefix_len = 0;
        left -= body;
        *taken += body;
        /* Gather straight into the chunk, which is then sealed in place. */
        while (body > 0) {
            size_t k = iov[i].iov_len - iov_off;
            if (k > body)
                k = body;
            memcpy(p, (const uint8_t *)iov[i].iov_base + iov_off, k);
            p += k;
            body -= k;
            iov_off += k;
            if (iov_off == iov[i].iov_len) {
                i++;
                iov_off = 0;
            }
        }
        seal_chunk(&e->dir, chunk, n);
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

ssize_t
ss_decoder_next(struct ss_decoder *d, uint8_t *buf, size_t len, size_t *plen)
{
    size_t n;

    *plen = 0;
    if (d->failed)
        return -1;
    if (!d->have_salt) {
        if (len < d->salt_len)
            return 0;
        ss_dir_init(&d->dir, d->cipher, d->key, buf);
        d->have_salt = 1;
        return (ssize_t)d->salt_len;
    }
    if (!d->have_len) {
        if (len < SS_CHUNK_HDR)
            return 0;
        if (tls_aead_open(&d->dir.aead, d->dir.nonce, buf, 2, buf + 2) != 0)
            goto fail;
        nonce_next(d->dir.nonce);
        if (ss_chunk_len(buf) > SS_PAYLOAD_MAX)
            goto fail;
        d->have_len = 1;
    }
    n = ss_chunk_len(buf);
    if (len < n + SS_CHUNK_OVERHEAD)
        return 0;
    if (tls_aead_open(&d->dir.aead, d->dir.nonce, buf + SS_CHUNK_HDR, n, buf + SS_CHUNK_HDR + n) != 0)
        goto fail;
    nonce_next(d->dir.nonce);
    d->have_len = 0;
    *plen = n;
    return (ssize_t)(n + SS_CHUNK_OVERHEAD);
fail:
    d->failed = 1;
    return -1;
}
