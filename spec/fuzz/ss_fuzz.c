#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbound/proxy.h"
#include "outbound/ss_codec.h"
#include "fuzz.h"

/* Input: [mode][cipher][rest]. Modes:
 *   0  rest is a received stream: decoded in pieces (the piece sizes come
 *      from the bytes themselves), checking the decoder's contract
 *   1  rest is chunk payloads: sealed, optionally one byte altered, and
 *      decoded again: equal when untouched, refused when altered
 *   2  rest is write and buffer sizes: a pattern sealed in those writes
 *      and decoded in pieces must come back whole
 *   3  rest is a UDP datagram for outbound_ss_udp_open; then rest is the
 *      plaintext of a validly sealed datagram */
#define BUF_CAP (SS_SALT_MAX + 2 * SS_CHUNK_MAX)

static uint8_t ct[4 * SS_CHUNK_MAX + 4096], pt[3 * SS_CHUNK_MAX], back[3 * SS_CHUNK_MAX + 512];
static uint8_t buf[BUF_CAP];

static struct outbound_proxy proxies[3];

static void
setup(void)
{
    static int done;
    static const char *names[] = {"aes-128-gcm", "aes-256-gcm", "chacha20-ietf-poly1305"};

    if (done)
        return;
    for (int i = 0; i < 3; i++)
        CHECK(outbound_ss_setup(&proxies[i], names[i], "fuzz") == 0);
    done = 1;
}

/* Feeds ct[0..len) through a stream-sized buffer as ss.c does: pieces of
 * sizes drawn from |sizes|, whole items opened in place, a partial one
 * moved to the front. Returns the payload length in |out| or -1. */
static ssize_t
decode(const struct outbound_proxy *p, const uint8_t *in, size_t len, const uint8_t *sizes,
       size_t nsizes, uint8_t *out, size_t cap)
{
    struct ss_decoder d;
    size_t dec = 0, end = 0, fed = 0, got = 0, si = 0;
    int failed = 0;

    ss_decoder_init(&d, p->cipher, p->key);
    while (fed < len) {
        size_t k = nsizes > 0 ? (size_t)sizes[si++ % nsizes] * 97 + 1 : len;
        if (k > BUF_CAP - end)
            k = BUF_CAP - end;
        if (k > len - fed)
            k = len - fed;
        CHECK(k > 0);
        memcpy(buf + end, in + fed, k);
        end += k;
        fed += k;
        for (;;) {
            size_t plen = 12345;
            ssize_t r = ss_decoder_next(&d, buf + dec, end - dec, &plen);
            if (failed) {
                CHECK(r == -1); /* sticky */
                return -1;
            }
            if (r < 0) {
                failed = 1;
                continue;
            }
            if (r == 0)
                break;
            CHECK((size_t)r <= end - dec);
            CHECK(plen <= SS_PAYLOAD_MAX);
            CHECK(plen == 0 || (size_t)r == plen + SS_CHUNK_OVERHEAD);
            CHECK(plen == 0 || ss_chunk_len(buf + dec) == plen);
            if (plen > 0 && out != NULL) {
                CHECK(got + plen <= cap);
                memcpy(out + got, buf + dec + SS_CHUNK_HDR, plen);
            }
            got += plen;
            dec += (size_t)r;
        }
        /* A partial item never fills the buffer: there is room to go on. */
        memmove(buf, buf + dec, end - dec);
        end -= dec;
        dec = 0;
        CHECK(end < BUF_CAP);
    }
    return end == 0 ? (ssize_t)got : -2;
}

static void
fuzz_stream(const struct outbound_proxy *p, const uint8_t *in, size_t n)
{
    size_t nsizes = n > 0 ? in[0] % 8 : 0;

    if (n < 1 + nsizes)
        return;
    decode(p, in + 1 + nsizes, n - 1 - nsizes, in + 1, nsizes, NULL, 0);
}

static void
fuzz_tamper(const struct outbound_proxy *p, const uint8_t *in, size_t n)
{
    struct ss_encoder e;
    size_t w = 0, off = 0, taken;

    if (n < 4)
        return;
    size_t where = (size_t)in[0] << 8 | in[1];
    uint8_t flip = in[2];
    in += 3;
    n -= 3;
    if (n > sizeof(pt))
        n = sizeof(pt);
    ss_encoder_init(&e, p->cipher, p->key, NULL, NULL, 0);
    /* Payload bytes up to a 0xff are one write (64 at most): chunk sizes
     * vary with it. */
    for (int writes = 0; off < n; writes++) {
        const uint8_t *stop = writes < 63 ? memchr(in + off, 0xff, n - off) : NULL;
        size_t len = stop != NULL ? (size_t)(stop - (in + off)) + 1 : n - off;
        struct iovec iov = {(void *)(in + off), len};
        w += ss_encoder_seal(&e, ct + w, sizeof(ct) - w, &iov, 1, &taken);
        CHECK(taken == len);
        off += len;
    }
    CHECK(w >= e.salt_len);
    if (flip != 0)
        ct[where % w] ^= flip;
    ssize_t r = decode(p, ct, w, in, n < 4 ? n : 4, back, sizeof(back));
    if (flip == 0) {
        CHECK(r == (ssize_t)n);
        CHECK(memcmp(back, in, n) == 0);
    } else {
        CHECK(r < 0);
    }
}

static void
fuzz_roundtrip(const struct outbound_proxy *p, const uint8_t *in, size_t n)
{
    struct ss_encoder e;
    size_t total = 0, w = 0, i = 0;
    static const uint8_t hdr[] = {1, 10, 0, 0, 1, 0, 80};

    ss_encoder_init(&e, p->cipher, p->key, NULL, hdr, sizeof(hdr));
    /* Pairs of bytes: a write size and the room the buffer has. */
    while (i + 1 < n && total < sizeof(pt) - SS_CHUNK_MAX) {
        size_t len = (size_t)in[i] * 131 % (SS_CHUNK_MAX + 200);
        size_t room = (size_t)in[i + 1] * 257 + 1;
        size_t pos = total, taken;
        i += 2;
        if (len > sizeof(pt) - total)
            len = sizeof(pt) - total;
        if (room > sizeof(ct) - w)
            room = sizeof(ct) - w;
        for (size_t k = 0; k < len; k++)
            pt[pos + k] = (uint8_t)((pos + k) * 7 + 3);
        /* Split across two iovecs, as a ring buffer would. */
        struct iovec iov[2] = {{pt + pos, len / 3}, {pt + pos + len / 3, len - len / 3}};
        size_t wrote = ss_encoder_seal(&e, ct + w, room, iov, 2, &taken);
        CHECK(wrote <= room && taken <= len);
        CHECK(taken == 0 || wrote >= taken + SS_CHUNK_OVERHEAD);
        w += wrote;
        total += taken; /* a write cut short by the room goes on from there */
        if (sizeof(ct) - w < SS_CHUNK_MAX)
            break;
    }
    if (e.prefix_len > 0 || !e.started) {
        size_t taken;
        w += ss_encoder_seal(&e, ct + w, sizeof(ct) - w, NULL, 0, &taken);
    }
    CHECK(e.prefix_len == 0);
    ssize_t r = decode(p, ct, w, in, n < 6 ? n : 6, back, sizeof(back));
    CHECK(r == (ssize_t)(total + sizeof(hdr)));
    CHECK(memcmp(back, hdr, sizeof(hdr)) == 0);
    CHECK(memcmp(back + sizeof(hdr), pt, total) == 0);
}

static void
fuzz_udp(const struct outbound_proxy *p, const uint8_t *in, size_t n)
{
    struct flow_addr from, again;
    size_t plen, sl = ss_key_len(p->cipher);
    ssize_t off;

    if (n > sizeof(pt) - sl - TLS_AEAD_TAG_LEN)
        n = sizeof(pt) - sl - TLS_AEAD_TAG_LEN;
    memcpy(pt, in, n);
    off = outbound_ss_udp_open(p, pt, n, &from, &plen);
    CHECK(off == -1 || (size_t)off + plen + TLS_AEAD_TAG_LEN == n);

    /* The same bytes as the plaintext of a validly sealed datagram. */
    struct ss_dir d;
    memset(pt, 0x42, sl);
    ss_dir_init(&d, p->cipher, p->key, pt);
    memcpy(pt + sl, in, n);
    tls_aead_seal(&d.aead, d.nonce, pt + sl, n, pt + sl + n);
    off = outbound_ss_udp_open(p, pt, sl + n + TLS_AEAD_TAG_LEN, &from, &plen);
    int alen = outbound_addr_parse(in, n, &again);
    if (alen <= 0) {
        CHECK(off == -1);
        return;
    }
    CHECK(off == (ssize_t)(sl + (size_t)alen) && plen == n - (size_t)alen);
    CHECK(memcmp(pt + off, in + alen, plen) == 0);
    CHECK(from.kind == again.kind && from.port == again.port);

    /* Sealing it back gives a datagram that opens to the same. */
    ssize_t m = outbound_ss_udp_seal(p, &from, in + alen, plen, ct, sizeof(ct));
    CHECK(m > 0);
    off = outbound_ss_udp_open(p, ct, (size_t)m, &again, &plen);
    CHECK(off > 0 && plen == n - (size_t)alen && memcmp(ct + off, in + alen, plen) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    if (size < 2)
        return 0;
    const struct outbound_proxy *p = &proxies[data[1] % 3];
    switch (data[0] % 4) {
    case 0:
        fuzz_stream(p, data + 2, size - 2);
        break;
    case 1:
        fuzz_tamper(p, data + 2, size - 2);
        break;
    case 2:
        fuzz_roundtrip(p, data + 2, size - 2);
        break;
    default:
        fuzz_udp(p, data + 2, size - 2);
        break;
    }
    return 0;
}
