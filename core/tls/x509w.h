#ifndef CHUTE_TLS_X509W_H
#define CHUTE_TLS_X509W_H

/* Inside core/tls only: chute's X.509 DER writer (x509w.c) for the local
 * CA and the leaves minted under it, and the CA object (ca.c) the mint
 * (mint.c) signs with. The profile is notes/bearssl.md §4: v3, 16-byte
 * random serial, ecdsa-with-SHA256, P-256 keys, critical basicConstraints
 * and keyUsage, serverAuth EKU, SAN, SKI/AKI. */

#include <stdint.h>

#include "tls/tls_int.h"

/* A certificate we write stays under 1 KiB (two 253-byte names at most). */
#define X509W_MAX 2048
#define X509W_NAME_MAX 600
#define X509W_KEYID_MAX 64 /* another CA's SKI may be longer than SHA-1's 20 */
#define X509W_CN_MAX 64    /* X.520's ub-common-name */
#define X509W_DAY 86400

struct x509w_cert {
    const unsigned char *issuer; /* the signer's encoded subject Name, copied as is */
    size_t issuer_len;
    const unsigned char *subject; /* encoded Name (x509w_name) */
    size_t subject_len;
    const unsigned char *pub; /* the key: an uncompressed P-256 point (65 bytes) */
    size_t pub_len;
    const unsigned char *aki; /* the issuer's key identifier, NULL for none */
    size_t aki_len;
    int ca;          /* CA profile: cA TRUE pathLen 0, keyCertSign + cRLSign, no EKU/SAN */
    const char *dns; /* leaf: the SAN dNSName (lower case), or NULL with |ip| */
    const unsigned char *ip;
    size_t ip_len; /* 4 or 16 */
    int64_t not_before, not_after; /* Unix seconds */
};

/* The Name { [O=|org|,] CN=|cn| } (UTF8String) in |out|: its length, or
 * 0 when it does not fit. |cn| NULL: the empty Name. */
size_t x509w_name(unsigned char *out, size_t cap, const char *org, const char *cn);
/* The key identifier of |pub|: SHA-1 of the subjectPublicKey BIT STRING's
 * contents (RFC 5280 §4.2.1.2 method 1). */
void x509w_key_id(const unsigned char *pub, size_t len, unsigned char id[20]);
/* Writes |c| with a fresh random serial, signed by |issuer_key| with
 * ECDSA-SHA256, into |out| (|cap| >= X509W_MAX): the DER length, or 0 when
 * it does not fit or the signature failed. */
size_t x509w_sign(unsigned char *out, size_t cap, const struct x509w_cert *c,
                  const br_ec_private_key *issuer_key);
/* A P-256 key pair from the system's entropy: the private key in |sk|
 * (its x in |kbuf|, >= BR_EC_KBUF_PRIV_MAX_SIZE) and the public point in
 * |pub| (>= BR_EC_KBUF_PUB_MAX_SIZE): the point's length, or 0. */
size_t x509w_keygen(br_ec_private_key *sk, unsigned char *kbuf, unsigned char *pub);

struct tls_ca {
    unsigned char *der; /* the certificate */
    size_t der_len;
    char *pem;
    unsigned char dn[X509W_NAME_MAX]; /* its subject, the leaves' issuer */
    size_t dn_len;
    unsigned char key_id[X509W_KEYID_MAX]; /* its SKI: the leaves' AKI */
    size_t key_id_len;
    int64_t not_after; /* Unix seconds: leaves end no later */
    br_ec_private_key sk;
    unsigned char kbuf[BR_EC_KBUF_PRIV_MAX_SIZE];
};

#endif
