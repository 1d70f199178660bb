#include "tls/crypto.h"

#include <bearssl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* GCM is assembled from BearSSL's CTR and GHASH primitives rather than
 * br_gcm_context: that context points at its block cipher, so it could not
 * live in a movable, const struct tls_aead, and it needs a reset per
 * operation. With a 96-bit nonce, J0 = nonce || 1, the payload is CTR from
 * counter 2, and the tag is GHASH(C, lengths) XOR E(J0) — the same steps
 * br_gcm runs. */
struct gcm {
    union {
        const br_block_ctr_class *vtable;
        br_aes_x86ni_ctr_keys x86ni;
        br_aes_ct64_ctr_keys ct64;
    } keys;
    unsigned char h[16];
};

struct chacha {
    unsigned char key[32];
};

_Static_assert(sizeof(struct gcm) <= sizeof(((struct tls_aead *)0)->_ctx), "tls_aead._ctx too small");
_Static_assert(sizeof(struct chacha) <= sizeof(((struct tls_aead *)0)->_ctx), "tls_aead._ctx too small");
_Static_assert(_Alignof(struct gcm) <= 16, "tls_aead._ctx under-aligned");

/* The implementations for this CPU, picked once: the getters run CPUID,
 * which traps to the hypervisor on VMs, too slow for every UDP packet. */
static struct {
    const br_block_ctr_class *aes;
    br_ghash ghash;
    br_chacha20_run chacha;
    br_poly1305_run poly;
} impl;
static pthread_once_t impl_once = PTHREAD_ONCE_INIT;

static void
impl_pick(void)
{
    /* CHUTE_CRYPTO_PORTABLE=1 runs the portable code on any CPU: the unit
     * test checks it against the same vectors. */
    const char *portable = getenv("CHUTE_CRYPTO_PORTABLE");

    if (portable != NULL && strcmp(portable, "1") == 0) {
        impl.aes = &br_aes_ct64_ctr_vtable;
        impl.ghash = br_ghash_ctmul64;
        impl.chacha = br_chacha20_ct_run;
        impl.poly = br_poly1305_ctmul_run;
        return;
    }
    impl.aes = br_aes_x86ni_ctr_get_vtable();
    if (impl.aes == NULL)
        impl.aes = &br_aes_ct64_ctr_vtable;
    impl.ghash = br_ghash_pclmul_get();
    if (impl.ghash == NULL)
        impl.ghash = br_ghash_ctmul64;
    impl.chacha = br_chacha20_sse2_get();
    if (impl.chacha == NULL)
        impl.chacha = br_chacha20_ct_run;
    impl.poly = br_poly1305_ctmulq_get();
    if (impl.poly == NULL)
        impl.poly = br_poly1305_ctmul_run;
}

static inline void
impl_init(void)
{
    pthread_once(&impl_once, impl_pick);
}

size_t
tls_aead_key_len(enum tls_aead_alg alg)
{
    return alg == TLS_AEAD_AES_128_GCM ? 16 : 32;
}

void
tls_aead_init(struct tls_aead *a, enum tls_aead_alg alg, const uint8_t *key)
{
    impl_init();
    memset(a, 0, sizeof(*a));
    a->alg = alg;
    if (alg == TLS_AEAD_CHACHA20_POLY1305) {
        memcpy(((struct chacha *)a->_ctx)->key, key, 32);
        return;
    }
    struct gcm *g = (struct gcm *)a->_ctx;
    static const unsigned char zero_iv[12];
    impl.aes->init(&g->keys.vtable, key, tls_aead_key_len(alg));
    /* H = E(0^128): the CTR block for IV 0, counter 0, over zeros. */
    memset(g->h, 0, sizeof(g->h));
    impl.aes->run(&g->keys.vtable, zero_iv, 0, g->h, sizeof(g->h));
}

int
tls_aead_stepwise(const struct tls_aead *a)
{
    return a->alg != TLS_AEAD_CHACHA20_POLY1305;
}

void
tls_aead_begin(const struct tls_aead *a, struct tls_aead_steps *st,
               const uint8_t nonce[TLS_AEAD_NONCE_LEN])
{
    (void)a;
    memset(st->y, 0, sizeof(st->y));
    memcpy(st->nonce, nonce, sizeof(st->nonce));
    st->ctr = 2;
    st->len = 0;
}

/* One step is one CTR call and one GHASH call over the same bytes, just
 * touched by the other: the second pass reads L1, not L2 or memory. */
void
tls_aead_seal_step(const struct tls_aead *a, struct tls_aead_steps *st, uint8_t *data, size_t len)
{
    const struct gcm *g = (const struct gcm *)a->_ctx;

    st->ctr = impl.aes->run(&g->keys.vtable, st->nonce, st->ctr, data, len);
    impl.ghash(st->y, g->h, data, len);
    st->len += len;
}

void
tls_aead_open_step(const struct tls_aead *a, struct tls_aead_steps *st, uint8_t *data, size_t len)
{
    const struct gcm *g = (const struct gcm *)a->_ctx;

    impl.ghash(st->y, g->h, data, len);
    st->ctr = impl.aes->run(&g->keys.vtable, st->nonce, st->ctr, data, len);
    st->len += len;
}

void
tls_aead_end(const struct tls_aead *a, struct tls_aead_steps *st, uint8_t tag[TLS_AEAD_TAG_LEN])
{
    const struct gcm *g = (const struct gcm *)a->_ctx;
    uint8_t lens[16] = {0};
    uint64_t bits = st->len << 3;

    for (int i = 0; i < 8; i++)
        lens[15 - i] = (uint8_t)(bits >> (8 * i));
    impl.ghash(st->y, g->h, lens, sizeof(lens));
    impl.aes->run(&g->keys.vtable, st->nonce, 1, st->y, 16);
    memcpy(tag, st->y, TLS_AEAD_TAG_LEN);
}

/* At most one block (every Shadowsocks length field): one CTR call gives
 * E(J0) and the payload's keystream, one GHASH call covers the padded
 * block and the lengths. That halves the fixed cost, which is all there
 * is at this size. */
#define GCM_SMALL 16

static void
gcm_small_keystream(const struct gcm *g, const uint8_t nonce[12], uint8_t ks[32])
{
    memset(ks, 0, 32);
    impl.aes->run(&g->keys.vtable, nonce, 1, ks, 32);
}

static void
gcm_small_tag(const struct gcm *g, const uint8_t *c, size_t len, const uint8_t ks[16],
              uint8_t y[16])
{
    uint8_t blk[32] = {0};

    memcpy(blk, c, len);
    blk[30] = (uint8_t)((len << 3) >> 8);
    blk[31] = (uint8_t)(len << 3);
    memset(y, 0, 16);
    impl.ghash(y, g->h, blk, sizeof(blk));
    for (int i = 0; i < 16; i++)
        y[i] ^= ks[i];
}

void
tls_aead_seal(const struct tls_aead *a, const uint8_t nonce[TLS_AEAD_NONCE_LEN], uint8_t *data,
              size_t len, uint8_t tag[TLS_AEAD_TAG_LEN])
{
    if (a->alg == TLS_AEAD_CHACHA20_POLY1305) {
        static const unsigned char no_aad[1];
        impl.poly(((const struct chacha *)a->_ctx)->key, nonce, data, len, no_aad, 0, tag,
                  impl.chacha, 1);
        return;
    }
    const struct gcm *g = (const struct gcm *)a->_ctx;
    if (len <= GCM_SMALL) {
        uint8_t ks[32];
        gcm_small_keystream(g, nonce, ks);
        for (size_t i = 0; i < len; i++)
            data[i] ^= ks[16 + i];
        gcm_small_tag(g, data, len, ks, tag);
        return;
    }
    struct tls_aead_steps st;
    tls_aead_begin(a, &st, nonce);
    for (size_t off = 0; off < len; off += TLS_AEAD_STEP)
        tls_aead_seal_step(a, &st, data + off, len - off < TLS_AEAD_STEP ? len - off : TLS_AEAD_STEP);
    tls_aead_end(a, &st, tag);
}

static int
tag_equal(const uint8_t *x, const uint8_t *y)
{
    unsigned d = 0;

    for (int i = 0; i < TLS_AEAD_TAG_LEN; i++)
        d |= x[i] ^ y[i];
    return d == 0;
}

int
tls_aead_open(const struct tls_aead *a, const uint8_t nonce[TLS_AEAD_NONCE_LEN], uint8_t *data,
              size_t len, const uint8_t tag[TLS_AEAD_TAG_LEN])
{
    uint8_t want[TLS_AEAD_TAG_LEN];

    if (a->alg == TLS_AEAD_CHACHA20_POLY1305) {
        static const unsigned char no_aad[1];
        impl.poly(((const struct chacha *)a->_ctx)->key, nonce, data, len, no_aad, 0, want,
                  impl.chacha, 0);
        return tag_equal(want, tag) ? 0 : -1;
    }
    const struct gcm *g = (const struct gcm *)a->_ctx;
    if (len <= GCM_SMALL) {
        uint8_t ks[32];
        gcm_small_keystream(g, nonce, ks);
        gcm_small_tag(g, data, len, ks, want);
        if (!tag_equal(want, tag))
            return -1;
        for (size_t i = 0; i < len; i++)
            data[i] ^= ks[16 + i];
        return 0;
    }
    /* Hashed and decrypted a step at a time (one pass over memory): a
     * forged chunk is decrypted too, and the caller drops it. */
    uint8_t *const d[1] = {data};
    const size_t l[1] = {len};
    return tls_aead_openv(a, nonce, d, l, 1, tag);
}

/* GCM over pieces: whole 16-byte blocks straight from each piece, a block
 * split between two pieces through |blk| (decrypted there, copied back). */
static int
gcm_openv(const struct tls_aead *a, const uint8_t nonce[TLS_AEAD_NONCE_LEN], uint8_t *const data[],
          const size_t len[], int n, const uint8_t tag[TLS_AEAD_TAG_LEN])
{
    struct tls_aead_steps st;
    uint8_t blk[16], want[TLS_AEAD_TAG_LEN];
    uint8_t *part = NULL; /* where blk[0, have) came from */
    size_t have = 0;

    tls_aead_begin(a, &st, nonce);
    for (int i = 0; i < n; i++) {
        uint8_t *p = data[i];
        size_t left = len[i];
        if (have > 0) { /* complete the split block */
            size_t k = 16 - have < left ? 16 - have : left;
            memcpy(blk + have, p, k);
            int last = i == n - 1 && k == left;
            if (have + k < 16 && !last) {
                /* A piece shorter than the rest of a block: more than one
                 * split, which TLS_AEAD_SPANS pieces never need. */
                return -1;
            }
            tls_aead_open_step(a, &st, blk, have + k);
            memcpy(part, blk, have);
            memcpy(p, blk + have, k);
            p += k;
            left -= k;
            have = 0;
        }
        size_t whole = i == n - 1 ? left : left & ~(size_t)15;
        for (size_t off = 0; off < whole; off += TLS_AEAD_STEP)
            tls_aead_open_step(a, &st, p + off,
                               whole - off < TLS_AEAD_STEP ? whole - off : TLS_AEAD_STEP);
        if (whole < left) { /* not the last piece: the next one ends the block */
            have = left - whole;
            part = p + whole;
            memcpy(blk, part, have);
        }
    }
    tls_aead_end(a, &st, want);
    return tag_equal(want, tag) ? 0 : -1;
}

int
tls_aead_openv(const struct tls_aead *a, const uint8_t nonce[TLS_AEAD_NONCE_LEN],
               uint8_t *const data[], const size_t len[], int n, const uint8_t tag[TLS_AEAD_TAG_LEN])
{
    static _Thread_local uint8_t join[TLS_AEAD_JOIN_MAX];
    size_t total = 0;

    if (n < 0 || n > TLS_AEAD_SPANS)
        return -1;
    for (int i = 0; i < n; i++)
        total += len[i];
    if (a->alg != TLS_AEAD_CHACHA20_POLY1305 && total > GCM_SMALL)
        return gcm_openv(a, nonce, data, len, n, tag);
    if (n == 1)
        return tls_aead_open(a, nonce, data[0], len[0], tag);
    if (total > sizeof(join))
        return -1;
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        memcpy(join + o, data[i], len[i]);
        o += len[i];
    }
    if (tls_aead_open(a, nonce, join, total, tag) != 0)
        return -1;
    o = 0;
    for (int i = 0; i < n; i++) {
        memcpy(data[i], join + o, len[i]);
        o += len[i];
    }
    return 0;
}

const char *
tls_aead_impl(enum tls_aead_alg alg)
{
    impl_init();
    if (alg == TLS_AEAD_CHACHA20_POLY1305) {
        if (impl.chacha == br_chacha20_sse2_run)
            return impl.poly == br_poly1305_ctmulq_run ? "chacha20-sse2+ctmulq"
                                                         : "chacha20-sse2+ctmul";
        return impl.poly == br_poly1305_ctmulq_run ? "chacha20-ct+ctmulq" : "chacha20-ct+ctmul";
    }
    if (impl.aes == &br_aes_x86ni_ctr_vtable)
        return impl.ghash == br_ghash_pclmul ? "aes-x86ni+pclmul" : "aes-x86ni+ctmul64";
    return impl.ghash == br_ghash_pclmul ? "aes-ct64+pclmul" : "aes-ct64+ctmul64";
}

void
tls_hkdf_sha1(const uint8_t *ikm, size_t ikm_len, const uint8_t *salt, size_t salt_len,
              const char *info, uint8_t *out, size_t outlen)
{
    br_hkdf_context hc;

    br_hkdf_init(&hc, &br_sha1_vtable, salt, salt_len);
    br_hkdf_inject(&hc, ikm, ikm_len);
    br_hkdf_flip(&hc);
    br_hkdf_produce(&hc, info, strlen(info), out, outlen);
}

/* One-shot digests through BearSSL's generic hash interface. */
static void
digest(const br_hash_class *vt, const void *data, size_t len, uint8_t *out)
{
    br_hash_compat_context c;

    vt->init(&c.vtable);
    vt->update(&c.vtable, data, len);
    vt->out(&c.vtable, out);
}

void
tls_md5(const void *data, size_t len, uint8_t out[16])
{
    digest(&br_md5_vtable, data, len, out);
}

void
tls_sha1(const void *data, size_t len, uint8_t out[20])
{
    digest(&br_sha1_vtable, data, len, out);
}

void
tls_sha224(const void *data, size_t len, uint8_t out[28])
{
    digest(&br_sha224_vtable, data, len, out);
}

/* One DRBG per thread, so no lock; a forked child would otherwise repeat
 * its parent's stream (and salts), hence the reseed on a new pid. The
 * periodic reseed bounds what a leaked state predicts. */
#define RESEED_EVERY (1u << 16)

static _Thread_local struct {
    br_hmac_drbg_context drbg;
    pid_t pid;
    unsigned uses;
} rng;

static void
rng_seed(void)
{
    br_prng_seeder seeder = br_prng_seeder_system(NULL);
    pid_t pid = getpid();

    if (rng.pid == 0)
        br_hmac_drbg_init(&rng.drbg, &br_sha256_vtable, &pid, sizeof(pid));
    else
        br_hmac_drbg_update(&rng.drbg, &pid, sizeof(pid));
    /* Without entropy every salt would be predictable: refuse to run. */
    if (seeder == NULL || !seeder(&rng.drbg.vtable)) {
        fputs("chute: no system entropy source\n", stderr);
        abort();
    }
    rng.pid = pid;
    rng.uses = 0;
}

void
tls_random(void *out, size_t len)
{
    if (rng.pid != getpid() || ++rng.uses >= RESEED_EVERY)
        rng_seed();
    br_hmac_drbg_generate(&rng.drbg, out, len);
}
