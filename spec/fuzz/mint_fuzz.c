/* libFuzzer target for core/tls/mint.c and x509w.c: the input is a host
 * name as a ClientHello's SNI or a CONNECT line brings it (NUL-free, up to
 * 300 bytes). tls_mint_get either refuses it with a reason or mints a leaf
 * that BearSSL's own X.509 validator accepts under the CA for that host
 * (dNSName through br_x509_minimal; an address through its iPAddress SAN),
 * and a second get is answered from the cache with the same leaf. */

#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "tls/x509w.h"
#include "fuzz.h"

static struct tls_ca *ca;
static struct tls_mint *mint;
static br_x509_trust_anchor anchor;

static void
init(void)
{
    char dir[] = "/tmp/mint-fuzz-XXXXXX", cert[64], key[64], err[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(cert, sizeof(cert), "%s/ca.pem", dir);
    snprintf(key, sizeof(key), "%s/ca.key", dir);
    CHECK(tls_ca_create(cert, key, err, sizeof(err)) == 0);
    ca = tls_ca_load(cert, key, err, sizeof(err));
    CHECK(ca != NULL);
    unlink(cert);
    unlink(key);
    rmdir(dir);
    mint = tls_mint_new(ca, 64, err, sizeof(err));
    CHECK(mint != NULL);
    /* The anchor from the CA's own DER, as the trust store loads one. */
    size_t len;
    const unsigned char *der = tls_ca_der(ca, &len);
    static struct tls_bytes dn;
    br_x509_decoder_context dc;
    br_x509_decoder_init(&dc, tls_bytes_append, &dn);
    br_x509_decoder_push(&dc, der, len);
    const br_x509_pkey *pk = br_x509_decoder_get_pkey(&dc);
    CHECK(pk != NULL && !dn.oom);
    static unsigned char q[BR_EC_KBUF_PUB_MAX_SIZE];
    memcpy(q, pk->key.ec.q, pk->key.ec.qlen);
    anchor.dn.data = dn.p;
    anchor.dn.len = dn.len;
    anchor.flags = BR_X509_TA_CA;
    anchor.pkey.key_type = BR_KEYTYPE_EC;
    anchor.pkey.key.ec.curve = pk->key.ec.curve;
    anchor.pkey.key.ec.q = q;
    anchor.pkey.key.ec.qlen = pk->key.ec.qlen;
}

/* BearSSL's verdict on |cfg|'s chain for |name| (NULL: no name check). */
static int
validate(const struct tls_server_cfg *cfg, const char *name)
{
    br_x509_minimal_context xc;
    br_x509_minimal_init_full(&xc, &anchor, 1);
    xc.vtable->start_chain(&xc.vtable, name);
    for (size_t i = 0; i < cfg->nchain; i++) {
        xc.vtable->start_cert(&xc.vtable, (uint32_t)cfg->chain[i].data_len);
        xc.vtable->append(&xc.vtable, cfg->chain[i].data, cfg->chain[i].data_len);
        xc.vtable->end_cert(&xc.vtable);
    }
    return (int)xc.vtable->end_chain(&xc.vtable);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char host[301], err[256];
    unsigned char ip[16];
    if (ca == NULL)
        init();
    if (size > 300 || memchr(data, 0, size) != NULL)
        return 0;
    memcpy(host, data, size);
    host[size] = '\0';
    double now = (double)time(NULL);
    struct tls_mint_stats before, after;
    tls_mint_stats(mint, &before);
    err[0] = '\0';
    struct tls_server_cfg *cfg = tls_mint_get(mint, host, now, err, sizeof(err));
    if (cfg == NULL) {
        CHECK(strncmp(err, "tls: no leaf for '", 18) == 0);
        return 0;
    }
    tls_mint_stats(mint, &after);
    CHECK(after.minted + after.cached == before.minted + before.cached + 1);
    CHECK(cfg->nchain == 2 && cfg->chain[0].data_len < X509W_MAX);

    size_t n = strlen(host);
    char inner[301];
    int v6 = n >= 2 && host[0] == '[' && host[n - 1] == ']';
    snprintf(inner, sizeof(inner), "%.*s", (int)(v6 ? n - 2 : n), v6 ? host + 1 : host);
    size_t iplen = inet_pton(AF_INET, inner, ip) == 1 ? 4 : inet_pton(AF_INET6, inner, ip) == 1 ? 16 : 0;
    if (iplen != 0) {
        CHECK(validate(cfg, NULL) == 0);
        CHECK(tls_der_san_has_ip(cfg->chain[0].data, cfg->chain[0].data_len, ip, iplen));
    } else {
        if (n > 0 && inner[n - 1] == '.')
            inner[n - 1] = '\0'; /* the leaf's name has no final dot */
        CHECK(validate(cfg, inner) == 0); /* BearSSL matches names case-blind */
        if (strcasecmp(inner, "other.invalid") != 0)
            CHECK(validate(cfg, "other.invalid") != 0);
    }
    struct tls_server_cfg *again = tls_mint_get(mint, host, now, err, sizeof(err));
    CHECK(again == cfg);
    tls_server_cfg_free(again);
    tls_server_cfg_free(cfg);
    return 0;
}
