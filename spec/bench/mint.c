/* Minting leaves (core/tls/mint.c): a local CA made in a temp folder, then
 * N leaves for N hosts (one ECDSA P-256 signature each, plus the server
 * configuration around it) and M cached gets over the same hosts, timed
 * in the thread's CPU time; the memory a held leaf takes (malloc'd bytes
 * in use, mallinfo2); and one bare BearSSL signature, the floor of a mint.
 * Prints "row mint <mints/s> <us/mint> <gets/s> <ns/get> <bytes/leaf>
 * <sign us>". Used by scripts/bench/mint.
 *
 *   mint [--leaves N] [--gets M] */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bearssl.h>

#include "tls/tls.h"

static double
cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One ECDSA P-256 signature alone, as the mint makes it: its CPU us. */
static double
sign_us(void)
{
    br_hmac_drbg_context rng;
    br_ec_private_key sk;
    unsigned char kbuf[BR_EC_KBUF_PRIV_MAX_SIZE], hash[32] = {1}, sig[80];
    br_hmac_drbg_init(&rng, &br_sha256_vtable, "bench", 5);
    br_ec_keygen(&rng.vtable, br_ec_get_default(), &sk, kbuf, BR_EC_secp256r1);
    double t0 = cpu_s();
    for (int i = 0; i < 500; i++) {
        hash[0] = (unsigned char)i;
        br_ecdsa_sign_asn1_get_default()(br_ec_get_default(), &br_sha256_vtable, hash, &sk, sig);
    }
    return (cpu_s() - t0) * 1e6 / 500;
}

int
main(int argc, char **argv)
{
    size_t n = 2000, gets = 1000000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--leaves") == 0)
            n = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--gets") == 0)
            gets = strtoul(argv[i + 1], NULL, 10);
    }
    if (n == 0)
        n = 1;
    char dir[] = "/tmp/mint-bench-XXXXXX", cert[64], key[64], err[512], host[64];
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(cert, sizeof(cert), "%s/ca.pem", dir);
    snprintf(key, sizeof(key), "%s/ca.key", dir);
    struct tls_ca *ca = NULL;
    if (tls_ca_create(cert, key, err, sizeof(err)) != 0 ||
        (ca = tls_ca_load(cert, key, err, sizeof(err))) == NULL) {
        fprintf(stderr, "mint: %s\n", err);
        return 1;
    }
    unlink(cert);
    unlink(key);
    rmdir(dir);
    struct tls_mint *m = tls_mint_new(ca, n, err, sizeof(err));
    if (m == NULL) {
        fprintf(stderr, "mint: %s\n", err);
        return 1;
    }
    double now = (double)time(NULL);
    size_t before = mallinfo2().uordblks;
    double t0 = cpu_s();
    for (size_t i = 0; i < n; i++) {
        snprintf(host, sizeof(host), "host%zu.bench.example", i);
        struct tls_server_cfg *cfg = tls_mint_get(m, host, now, err, sizeof(err));
        if (cfg == NULL) {
            fprintf(stderr, "mint: %s\n", err);
            return 1;
        }
        tls_server_cfg_free(cfg);
    }
    double t1 = cpu_s();
    size_t held = mallinfo2().uordblks - before;
    for (size_t i = 0; i < gets; i++) {
        snprintf(host, sizeof(host), "host%zu.bench.example", i % n);
        tls_server_cfg_free(tls_mint_get(m, host, now, err, sizeof(err)));
    }
    double t2 = cpu_s();
    struct tls_mint_stats st;
    tls_mint_stats(m, &st);
    if (st.minted != n || st.cached != gets) {
        fprintf(stderr, "mint: minted %llu cached %llu, wanted %zu %zu\n",
                (unsigned long long)st.minted, (unsigned long long)st.cached, n, gets);
        return 1;
    }
    printf("row mint %.0f %.1f %.0f %.1f %.0f %.1f\n", n / (t1 - t0), (t1 - t0) * 1e6 / n,
           gets / (t2 - t1), (t2 - t1) * 1e9 / gets, (double)held / n, sign_us());
    tls_mint_free(m);
    tls_ca_free(ca);
    return 0;
}
