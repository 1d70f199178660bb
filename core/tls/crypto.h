#ifndef CHUTE_TLS_CRYPTO_H
#define CHUTE_TLS_CRYPTO_H

/* The primitives other folders need, on BearSSL's fastest implementations
 * for this CPU (AES-NI + PCLMUL GCM, SSE2 ChaCha20 + ctmulq Poly1305,
 * chosen once at first use, portable code otherwise). Only core/tls
 * includes bearssl.h, so contexts are opaque fixed-size storage here. */

#include <stddef.h>
#include <stdint.h>

enum tls_aead_alg {
    TLS_AEAD_AES_128_GCM = 0,
    TLS_AEAD_AES_256_GCM,
    TLS_AEAD_CHACHA20_POLY1305,
};

#define TLS_AEAD_NONCE_LEN 12
#define TLS_AEAD_TAG_LEN 16

/* A keyed AEAD. Big enough for BearSSL's AES-x86ni CTR keys + GHASH or the
 * ChaCha20 key (checked by a static assertion in crypto.c). */
struct tls_aead {
    enum tls_aead_alg alg;
    _Alignas(16) unsigned char _ctx[512];
};

/* Key length for |alg| (16 or 32). */
size_t tls_aead_key_len(enum tls_aead_alg alg);
/* Keys |a|. |key| has tls_aead_key_len(alg) bytes. */
void tls_aead_init(struct tls_aead *a, enum tls_aead_alg alg, const uint8_t *key);
/* Encrypts |len| bytes of |data| in place (no additional data) and writes
 * the 16-byte tag. */
void tls_aead_seal(const struct tls_aead *a, const uint8_t nonce[TLS_AEAD_NONCE_LEN],
                   uint8_t *data, size_t len, uint8_t tag[TLS_AEAD_TAG_LEN]);
/* Checks |tag| and decrypts in place: 0, or -1 (data left undefined). */
int tls_aead_open(const struct tls_aead *a, const uint8_t nonce[TLS_AEAD_NONCE_LEN],
                  uint8_t *data, size_t len, const uint8_t tag[TLS_AEAD_TAG_LEN]);
/* The same over bytes that sit in up to TLS_AEAD_SPANS pieces (a ring
 * buffer's two spans), in order, each opened in place. ChaCha20 pieces
 * are joined in a scratch buffer of TLS_AEAD_JOIN_MAX bytes: longer ones
 * fail (-1). */
#define TLS_AEAD_SPANS 2
#define TLS_AEAD_JOIN_MAX 16384
int tls_aead_openv(const struct tls_aead *a, const uint8_t nonce[TLS_AEAD_NONCE_LEN],
                   uint8_t *const data[], const size_t len[], int n,
                   const uint8_t tag[TLS_AEAD_TAG_LEN]);

/* AES-GCM a step at a time, so a caller can bring each step's bytes into
 * place (a gather copy) just before they are sealed, while they are in
 * L1: tls_aead_stepwise says whether |a| can (GCM: yes; ChaCha20: no,
 * BearSSL's Poly1305 runs in one call). Every step but the last has a
 * multiple of 16 bytes. */
struct tls_aead_steps {
    uint8_t y[16];
    uint8_t nonce[TLS_AEAD_NONCE_LEN];
    uint32_t ctr;
    uint64_t len;
};
int tls_aead_stepwise(const struct tls_aead *a);
void tls_aead_begin(const struct tls_aead *a, struct tls_aead_steps *st,
                    const uint8_t nonce[TLS_AEAD_NONCE_LEN]);
void tls_aead_seal_step(const struct tls_aead *a, struct tls_aead_steps *st, uint8_t *data,
                        size_t len);
void tls_aead_open_step(const struct tls_aead *a, struct tls_aead_steps *st, uint8_t *data,
                        size_t len);
void tls_aead_end(const struct tls_aead *a, struct tls_aead_steps *st,
                  uint8_t tag[TLS_AEAD_TAG_LEN]);
/* Bytes per step: a step's data stays in L1 between its passes. Smaller
 * steps cost more than they save (BearSSL's GHASH and CTR set up per
 * call: 1 KiB steps were 14% slower than one call per 16 KiB chunk, 8 KiB
 * steps level with it, measured with the data hot). */
#define TLS_AEAD_STEP 8192

/* Which implementation runs: "aes-x86ni+pclmul", "chacha20-sse2+ctmulq",
 * "aes-ct64" (portable) ... */
const char *tls_aead_impl(enum tls_aead_alg alg);

/* HKDF-SHA1 (RFC 5869): extract with |salt|, expand with |info| to |outlen|
 * bytes (≤ 255 * 20). */
void tls_hkdf_sha1(const uint8_t *ikm, size_t ikm_len, const uint8_t *salt, size_t salt_len,
                   const char *info, uint8_t *out, size_t outlen);
void tls_md5(const void *data, size_t len, uint8_t out[16]);
void tls_sha224(const void *data, size_t len, uint8_t out[28]);
void tls_sha1(const void *data, size_t len, uint8_t out[20]);
/* Cryptographically random bytes (the system seeder into an HMAC-DRBG,
 * reseeded after fork). */
void tls_random(void *out, size_t len);

#endif
