#ifndef CHUTE_OUTBOUND_SS_CODEC_H
#define CHUTE_OUTBOUND_SS_CODEC_H

/* Shadowsocks AEAD (SIP004) without I/O, private to core/outbound (ss.c),
 * its unit test, fuzz target and benchmark.
 *
 * A stream is [salt][chunk][chunk]..., a chunk
 *   [len 2 B BE, sealed][tag][payload, sealed][tag]
 * with len ≤ 0x3FFF, under a subkey HKDF-SHA1(master, salt, "ss-subkey")
 * and a 12-byte little-endian nonce counter bumped after every seal/open. */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "outbound/proxy.h"
#include "tls/crypto.h"

#define SS_PAYLOAD_MAX 0x3FFF
#define SS_CHUNK_HDR (2 + TLS_AEAD_TAG_LEN)                  /* payload offset in a chunk */
#define SS_CHUNK_OVERHEAD (2 + 2 * TLS_AEAD_TAG_LEN)         /* 34 */
#define SS_CHUNK_MAX (SS_PAYLOAD_MAX + SS_CHUNK_OVERHEAD)
#define SS_SALT_MAX 32
#define SS_ADDR_MAX (1 + 1 + 255 + 2)                         /* ATYP, name length, name, port */

/* Key (= salt) length of |c|: 16 or 32. */
size_t ss_key_len(enum outbound_ss_cipher c);
enum tls_aead_alg ss_alg(enum outbound_ss_cipher c);

/* One direction of one session: the subkey and the nonce counter. */
struct ss_dir {
    struct tls_aead aead;
    uint8_t nonce[TLS_AEAD_NONCE_LEN];
};

/* Derives the subkey from the master |key| and |salt| (both
 * ss_key_len(c) bytes); the nonce starts at zero. */
void ss_dir_init(struct ss_dir *d, enum outbound_ss_cipher c, const uint8_t *key,
                 const uint8_t *salt);

struct ss_encoder {
    struct ss_dir dir;
    size_t salt_len;
    int started; /* the salt has been written */
    uint8_t salt[SS_SALT_MAX];
    size_t prefix_len; /* bytes that lead the first chunk (the address), until written */
    uint8_t prefix[SS_ADDR_MAX];
};

/* |salt| NULL: a random one (tls_random). |prefix| (≤ SS_ADDR_MAX bytes)
 * goes at the start of the first chunk. */
void ss_encoder_init(struct ss_encoder *e, enum outbound_ss_cipher c, const uint8_t *key,
                     const uint8_t *salt, const uint8_t *prefix, size_t prefix_len);
/* Seals plaintext from |iov| into out[0..cap): the salt first (once), then
 * chunks of at most SS_PAYLOAD_MAX, the first one led by the prefix. Writes
 * a chunk for the prefix alone when |iov| is empty. Returns the bytes
 * written; |*taken| is how much of |iov| they hold (less than all when
 * |cap| ran out; 0 when not even the salt and a 1-byte chunk fit). */
size_t ss_encoder_seal(struct ss_encoder *e, uint8_t *out, size_t cap, const struct iovec *iov,
                       int iovcnt, size_t *taken);

struct ss_decoder {
    enum outbound_ss_cipher cipher;
    size_t salt_len;
    int have_salt;
    int have_len;  /* the length of the chunk at the buffer's start is opened in place */
    int failed;
    uint8_t key[32];
    struct ss_dir dir;
};

void ss_decoder_init(struct ss_decoder *d, enum outbound_ss_cipher c, const uint8_t *key);
/* Opens the next item at buf[0..len) in place: the salt (first; returns
 * its length with |*plen| 0) or one chunk (returns its size on the wire;
 * its |*plen| payload bytes are at buf + SS_CHUNK_HDR, and its first two
 * bytes now hold the length in clear). 0: more bytes needed — a chunk's
 * length may already be opened in place, so the caller keeps the bytes
 * and calls again with them at the start of |buf|. -1: a bad tag or a
 * length over 0x3FFF, and every later call fails too. */
ssize_t ss_decoder_next(struct ss_decoder *d, uint8_t *buf, size_t len, size_t *plen);
/* The same over bytes at b0[0..n0) then b1[0..n1) (a ring buffer's two
 * spans; |b1| NULL: none): an item may run from one into the other, and
 * a chunk's payload then lies in both, opened in place. */
ssize_t ss_decoder_next2(struct ss_decoder *d, uint8_t *b0, size_t n0, uint8_t *b1, size_t n1,
                         size_t *plen);

static inline size_t
ss_chunk_len(const uint8_t *chunk)
{
    return (size_t)chunk[0] << 8 | chunk[1];
}

#endif
