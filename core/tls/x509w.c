#include <string.h>
#include <stdio.h>
#include <time.h>

#include "tls/crypto.h"
#include "tls/x509w.h"

/* The DER is written back to front, so every length is known when its
 * header goes in front of the contents: each function below prepends, and
 * a structure's parts are written last one first. Lengths are minimal and
 * INTEGERs, BOOLEANs and named-bit BIT STRINGs take their DER forms. */

struct w {
    unsigned char *buf;
    size_t cap, pos; /* the bytes written are buf[pos..cap) */
    int err;         /* ran out of room: the result is void */
};

static void
w_init(struct w *w, unsigned char *buf, size_t cap)
{
    w->buf = buf;
    w->cap = w->pos = cap;
    w->err = 0;
}

/* Bytes written so far: a structure starts at w_len() and is wrapped
 * (w_wrap) once its contents are in. */
static size_t
w_len(const struct w *w)
{
    return w->cap - w->pos;
}

static void
w_put(struct w *w, const void *p, size_t n)
{
    if (w->err || n > w->pos) {
        w->err = 1;
        return;
    }
    w->pos -= n;
    memcpy(w->buf + w->pos, p, n);
}

static void
w_byte(struct w *w, unsigned char b)
{
    w_put(w, &b, 1);
}

/* The tag and length of contents that are the |len| bytes written since
 * |mark|. */
static void
w_wrap(struct w *w, unsigned char tag, size_t mark)
{
    size_t len = w_len(w) - mark;
    if (len < 0x80) {
        w_byte(w, (unsigned char)len);
    } else {
        unsigned char n = 0;
        for (; len > 0; len >>= 8, n++)
            w_byte(w, (unsigned char)len);
        w_byte(w, 0x80 | n);
    }
    w_byte(w, tag);
}

static void
w_tlv(struct w *w, unsigned char tag, const void *p, size_t n)
{
    size_t m = w_len(w);
    w_put(w, p, n);
    w_wrap(w, tag, m);
}

#define TAG_BOOLEAN 0x01
#define TAG_INTEGER 0x02
#define TAG_BIT_STRING 0x03
#define TAG_OCTET_STRING 0x04
#define TAG_OID 0x06
#define TAG_UTF8 0x0c
#define TAG_UTCTIME 0x17
#define TAG_GENTIME 0x18
#define TAG_SEQ 0x30
#define TAG_SET 0x31

/* Content octets of the OIDs. */
static const unsigned char oid_ecdsa_sha256[] = {0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02};
static const unsigned char oid_ec_pubkey[] = {0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01};
static const unsigned char oid_p256[] = {0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
static const unsigned char oid_org[] = {0x55, 0x04, 0x0a};
static const unsigned char oid_cn[] = {0x55, 0x04, 0x03};
static const unsigned char oid_basic[] = {0x55, 0x1d, 0x13};
static const unsigned char oid_ku[] = {0x55, 0x1d, 0x0f};
static const unsigned char oid_eku[] = {0x55, 0x1d, 0x25};
static const unsigned char oid_san[] = {0x55, 0x1d, 0x11};
static const unsigned char oid_ski[] = {0x55, 0x1d, 0x0e};
static const unsigned char oid_aki[] = {0x55, 0x1d, 0x23};

/* AlgorithmIdentifier ecdsa-with-SHA256, parameters absent (RFC 5758). */
static void
w_sigalg(struct w *w)
{
    size_t m = w_len(w);
    w_tlv(w, TAG_OID, oid_ecdsa_sha256, sizeof(oid_ecdsa_sha256));
    w_wrap(w, TAG_SEQ, m);
}

static void
w_rdn(struct w *w, const unsigned char *oid, size_t oidlen, const char *value)
{
    size_t m = w_len(w);
    w_tlv(w, TAG_UTF8, value, strlen(value));
    w_tlv(w, TAG_OID, oid, oidlen);
    w_wrap(w, TAG_SEQ, m);
    w_wrap(w, TAG_SET, m);
}

/* UTCTime before 2050, GeneralizedTime from then on (RFC 5280 §4.1.2.5). */
static void
w_time(struct w *w, int64_t t)
{
    time_t tt = (time_t)t;
    struct tm tm;
    char s[80];
    if (gmtime_r(&tt, &tm) == NULL || tm.tm_year + 1900 < 1950 || tm.tm_year + 1900 > 9999) {
        w->err = 1;
        return;
    }
    int year = tm.tm_year + 1900, utc = year < 2050;
    snprintf(s, sizeof(s), "%0*d%02d%02d%02d%02d%02dZ", utc ? 2 : 4, utc ? year % 100 : year,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    w_tlv(w, utc ? TAG_UTCTIME : TAG_GENTIME, s, strlen(s));
}

/* Extension { extnID, critical TRUE when set, extnValue } around the |len|
 * value bytes written since |mark|. */
static void
w_ext(struct w *w, size_t mark, const unsigned char *oid, size_t oidlen, int critical)
{
    static const unsigned char yes = 0xff;
    w_wrap(w, TAG_OCTET_STRING, mark);
    if (critical)
        w_tlv(w, TAG_BOOLEAN, &yes, 1);
    w_tlv(w, TAG_OID, oid, oidlen);
    w_wrap(w, TAG_SEQ, mark);
}

static void
w_extensions(struct w *w, const struct x509w_cert *c, const unsigned char ski[20])
{
    size_t all = w_len(w), m;
    if (c->aki != NULL) { /* AuthorityKeyIdentifier { [0] keyIdentifier } */
        m = w_len(w);
        w_tlv(w, 0x80, c->aki, c->aki_len);
        w_wrap(w, TAG_SEQ, m);
        w_ext(w, m, oid_aki, sizeof(oid_aki), 0);
    }
    m = w_len(w);
    w_tlv(w, TAG_OCTET_STRING, ski, 20);
    w_ext(w, m, oid_ski, sizeof(oid_ski), 0);
    if (!c->ca) {
        /* SAN: critical only when the subject is empty (RFC 5280 §4.1.2.6). */
        m = w_len(w);
        if (c->dns != NULL)
            w_tlv(w, 0x82, c->dns, strlen(c->dns)); /* dNSName */
        else
            w_tlv(w, 0x87, c->ip, c->ip_len); /* iPAddress */
        w_wrap(w, TAG_SEQ, m);
        w_ext(w, m, oid_san, sizeof(oid_san), c->subject_len <= 2);
        static const unsigned char eku[] = {0x30, 0x0a, 0x06, 0x08, 0x2b, 0x06,
                                            0x01, 0x05, 0x05, 0x07, 0x03, 0x01}; /* serverAuth */
        m = w_len(w);
        w_put(w, eku, sizeof(eku));
        w_ext(w, m, oid_eku, sizeof(oid_eku), 0);
    }
    /* keyUsage: digitalSignature (bit 0); the CA adds keyCertSign (5) and
     * cRLSign (6). No trailing zero bits, so the unused count differs. */
    static const unsigned char ku_leaf[] = {0x07, 0x80}, ku_ca[] = {0x01, 0x86};
    m = w_len(w);
    w_tlv(w, TAG_BIT_STRING, c->ca ? ku_ca : ku_leaf, 2);
    w_ext(w, m, oid_ku, sizeof(oid_ku), 1);
    /* basicConstraints: cA TRUE pathLen 0, or the empty SEQUENCE (cA
     * FALSE is the DEFAULT, so absent; never a pathLen in a leaf). */
    static const unsigned char bc_ca[] = {0x01, 0x01, 0xff, 0x02, 0x01, 0x00};
    m = w_len(w);
    if (c->ca)
        w_put(w, bc_ca, sizeof(bc_ca));
    w_wrap(w, TAG_SEQ, m);
    w_ext(w, m, oid_basic, sizeof(oid_basic), 1);
    w_wrap(w, TAG_SEQ, all);
    w_wrap(w, 0xa3, all); /* [3] EXPLICIT */
}

/* TBSCertificate. */
static void
w_tbs(struct w *w, const struct x509w_cert *c)
{
    unsigned char ski[20], serial[16];
    static const unsigned char v3[] = {0xa0, 0x03, 0x02, 0x01, 0x02};
    size_t all = w_len(w), m;

    x509w_key_id(c->pub, c->pub_len, ski);
    w_extensions(w, c, ski);
    m = w_len(w); /* SubjectPublicKeyInfo */
    w_put(w, c->pub, c->pub_len);
    w_byte(w, 0); /* no unused bits */
    w_wrap(w, TAG_BIT_STRING, m);
    size_t alg = w_len(w);
    w_tlv(w, TAG_OID, oid_p256, sizeof(oid_p256));
    w_tlv(w, TAG_OID, oid_ec_pubkey, sizeof(oid_ec_pubkey));
    w_wrap(w, TAG_SEQ, alg);
    w_wrap(w, TAG_SEQ, m);
    w_put(w, c->subject, c->subject_len);
    m = w_len(w);
    w_time(w, c->not_after);
    w_time(w, c->not_before);
    w_wrap(w, TAG_SEQ, m);
    w_put(w, c->issuer, c->issuer_len);
    w_sigalg(w);
    /* 126 random bits, positive, always 16 octets: top bit clear, 0x40 set. */
    tls_random(serial, sizeof(serial));
    serial[0] = (unsigned char)((serial[0] & 0x7f) | 0x40);
    w_tlv(w, TAG_INTEGER, serial, sizeof(serial));
    w_put(w, v3, sizeof(v3));
    w_wrap(w, TAG_SEQ, all);
}

size_t
x509w_name(unsigned char *out, size_t cap, const char *org, const char *cn)
{
    struct w w;
    w_init(&w, out, cap);
    if (cn != NULL)
        w_rdn(&w, oid_cn, sizeof(oid_cn), cn);
    if (org != NULL)
        w_rdn(&w, oid_org, sizeof(oid_org), org);
    w_wrap(&w, TAG_SEQ, 0);
    if (w.err)
        return 0;
    size_t n = w_len(&w);
    memmove(out, out + w.pos, n);
    return n;
}

void
x509w_key_id(const unsigned char *pub, size_t len, unsigned char id[20])
{
    tls_sha1(pub, len, id);
}

size_t
x509w_sign(unsigned char *out, size_t cap, const struct x509w_cert *c,
           const br_ec_private_key *issuer_key)
{
    unsigned char tbs[X509W_MAX], hash[32], sig[80];
    struct w w;
    br_sha256_context h;

    w_init(&w, tbs, sizeof(tbs));
    w_tbs(&w, c);
    if (w.err)
        return 0;
    const unsigned char *t = tbs + w.pos;
    size_t tlen = w_len(&w);
    br_sha256_init(&h);
    br_sha256_update(&h, t, tlen);
    br_sha256_out(&h, hash);
    size_t slen = br_ecdsa_sign_asn1_get_default()(br_ec_get_default(), &br_sha256_vtable, hash,
                                                   issuer_key, sig);
    if (slen == 0)
        return 0;
    /* Certificate { tbsCertificate, signatureAlgorithm, signatureValue } */
    w_init(&w, out, cap);
    w_put(&w, sig, slen);
    w_byte(&w, 0);
    w_wrap(&w, TAG_BIT_STRING, 0);
    w_sigalg(&w);
    w_put(&w, t, tlen);
    w_wrap(&w, TAG_SEQ, 0);
    if (w.err)
        return 0;
    size_t n = w_len(&w);
    memmove(out, out + w.pos, n);
    return n;
}

size_t
x509w_keygen(br_ec_private_key *sk, unsigned char *kbuf, unsigned char *pub)
{
    br_hmac_drbg_context rng;
    unsigned char seed[32];
    br_ec_public_key pk;
    const br_ec_impl *impl = br_ec_get_default();

    tls_random(seed, sizeof(seed)); /* the system's entropy, through crypto.c's DRBG */
    br_hmac_drbg_init(&rng, &br_sha256_vtable, seed, sizeof(seed));
    explicit_bzero(seed, sizeof(seed));
    size_t n = br_ec_keygen(&rng.vtable, impl, sk, kbuf, BR_EC_secp256r1);
    explicit_bzero(&rng, sizeof(rng));
    if (n == 0)
        return 0;
    return br_ec_compute_pub(impl, &pk, pub, sk);
}
