#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tls/crypto.h"
#include "tls/x509w.h"

/* The local CA: made once per install (a fresh P-256 key and a subject
 * no other install shares), loaded at start to sign the minted leaves. The
 * key is written PKCS#8 ("PRIVATE KEY"), mode 0600, and never
 * overwritten. */

#define CA_DAYS 3652      /* ~10 years, from a day in the past */
#define FILE_MAX (1 << 20) /* a PEM file larger than this is no CA of ours */
#define DAYS_TO_EPOCH 719528 /* BearSSL counts days from 0000-01-01 */

/* Makes the folders above |path| that are missing, mode 0700. */
static int
make_parents(const char *path, char *err, size_t errlen)
{
    char dir[4096];
    if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
        snprintf(err, errlen, "tls: %s: path too long", path);
        return -1;
    }
    char *slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "tls: %s: cannot make the folder (%s)", dir, strerror(errno));
            return -1;
        }
        *p = c;
        if (c == '\0')
            return 0;
    }
}

/* Writes |len| bytes to a new file |path| (O_EXCL) of |mode|: 0, or -1. */
static int
write_new(const char *path, const void *data, size_t len, mode_t mode, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) {
        snprintf(err, errlen, "tls: %s: %s", path,
                 errno == EEXIST ? "already exists: refusing to overwrite it (EEXIST)"
                                 : strerror(errno));
        return -1;
    }
    const char *p = data;
    size_t left = len;
    int e = fchmod(fd, mode) != 0 ? errno : 0; /* whatever the umask */
    while (e == 0 && left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            e = n < 0 ? errno : EIO;
            break;
        }
        p += n;
        left -= (size_t)n;
    }
    if (e == 0 && fsync(fd) != 0)
        e = errno;
    if (close(fd) != 0 && e == 0)
        e = errno;
    if (e != 0) {
        snprintf(err, errlen, "tls: %s: cannot write it (%s)", path, strerror(e));
        unlink(path);
        return -1;
    }
    return 0;
}

/* |der| as PEM text under |banner| (malloc'd, NUL-terminated), or NULL. */
static char *
pem_of(const void *der, size_t len, const char *banner)
{
    size_t n = br_pem_encode(NULL, der, len, banner, BR_PEM_LINE64);
    char *pem = malloc(n + 1);
    if (pem != NULL)
        br_pem_encode(pem, der, len, banner, BR_PEM_LINE64);
    return pem;
}

int
tls_ca_create(const char *cert_path, const char *key_path, char *err, size_t errlen)
{
    br_ec_private_key sk;
    unsigned char kbuf[BR_EC_KBUF_PRIV_MAX_SIZE], pub[BR_EC_KBUF_PUB_MAX_SIZE];
    unsigned char dn[X509W_NAME_MAX], ski[20], cert[X509W_MAX], suffix[8];
    unsigned char pk8[BR_EC_KBUF_PRIV_MAX_SIZE + BR_EC_KBUF_PUB_MAX_SIZE + 64];
    char cn[64], *cert_pem = NULL, *key_pem = NULL;
    struct stat st;
    int ret = -1;

    /* Neither may exist: checked first so that no half-made CA is left. */
    const char *paths[2] = {cert_path, key_path};
    for (int i = 0; i < 2; i++) {
        int e = lstat(paths[i], &st) == 0 ? EEXIST : errno;
        if (e != ENOENT) {
            snprintf(err, errlen, "tls: %s: %s", paths[i],
                     e == EEXIST ? "already exists: refusing to overwrite it (EEXIST)"
                                 : strerror(e));
            return -1;
        }
    }
    if (make_parents(cert_path, err, errlen) != 0 || make_parents(key_path, err, errlen) != 0)
        return -1;
    size_t publen = x509w_keygen(&sk, kbuf, pub);
    if (publen == 0) {
        snprintf(err, errlen, "tls: cannot make a P-256 key");
        goto done;
    }
    /* A subject of its own per install: NSS and Firefox mix up CAs that
     * share one. */
    tls_random(suffix, sizeof(suffix));
    int k = snprintf(cn, sizeof(cn), "chute CA ");
    for (size_t i = 0; i < sizeof(suffix); i++)
        k += snprintf(cn + k, sizeof(cn) - (size_t)k, "%02x", suffix[i]);
    size_t dnlen = x509w_name(dn, sizeof(dn), "chute", cn);
    x509w_key_id(pub, publen, ski);
    int64_t now = (int64_t)time(NULL);
    struct x509w_cert c = {
        .issuer = dn, .issuer_len = dnlen, .subject = dn, .subject_len = dnlen,
        .pub = pub, .pub_len = publen, .ca = 1,
        .not_before = now - X509W_DAY, .not_after = now - X509W_DAY + (int64_t)CA_DAYS * X509W_DAY,
    };
    size_t clen = dnlen ? x509w_sign(cert, sizeof(cert), &c, &sk) : 0;
    br_ec_public_key pk = {.curve = BR_EC_secp256r1, .q = pub, .qlen = publen};
    size_t klen = br_encode_ec_pkcs8_der(NULL, &sk, &pk);
    if (clen == 0 || klen == 0 || klen > sizeof(pk8)) {
        snprintf(err, errlen, "tls: cannot make the CA certificate");
        goto done;
    }
    br_encode_ec_pkcs8_der(pk8, &sk, &pk);
    cert_pem = pem_of(cert, clen, "CERTIFICATE");
    key_pem = pem_of(pk8, klen, BR_ENCODE_PEM_PKCS8);
    if (cert_pem == NULL || key_pem == NULL) {
        snprintf(err, errlen, "tls: out of memory");
        goto done;
    }
    /* The key first: a certificate whose key never got written is useless. */
    if (write_new(key_path, key_pem, strlen(key_pem), 0600, err, errlen) != 0)
        goto done;
    if (write_new(cert_path, cert_pem, strlen(cert_pem), 0644, err, errlen) != 0) {
        unlink(key_path);
        goto done;
    }
    ret = 0;
done:
    if (key_pem != NULL)
        explicit_bzero(key_pem, strlen(key_pem));
    free(key_pem);
    free(cert_pem);
    explicit_bzero(kbuf, sizeof(kbuf));
    explicit_bzero(pk8, sizeof(pk8));
    return ret;
}

/* The whole file |path| as text (malloc'd, NUL-terminated), or NULL with
 * |err| naming it. */
static char *
read_text(const char *what, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "tls: %s %s: cannot open it (%s)", what, path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, FILE_MAX + 1, f) : 0;
    int bad = buf == NULL ? ENOMEM : ferror(f) ? EIO : 0;
    fclose(f);
    if (bad == 0 && n > FILE_MAX)
        bad = EFBIG;
    if (bad != 0) {
        snprintf(err, errlen, "tls: %s %s: cannot read it (%s)", what, path, strerror(bad));
        if (buf != NULL)
            explicit_bzero(buf, n < FILE_MAX ? n : FILE_MAX);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

static void
append_dn(void *ctx, const void *data, size_t len)
{
    struct tls_ca *ca = ctx;
    if (ca->dn_len + len > sizeof(ca->dn)) {
        ca->dn_len = sizeof(ca->dn) + 1; /* too long: marked */
        return;
    }
    memcpy(ca->dn + ca->dn_len, data, len);
    ca->dn_len += len;
}

/* Fills |ca|'s subject, key identifier and end of validity from its
 * certificate: NULL, or the reason it cannot sign leaves. */
static const char *
ca_inspect(struct tls_ca *ca)
{
    static const unsigned char oid_ski[] = {0x55, 0x1d, 0x0e};
    br_x509_decoder_context dc;
    br_x509_decoder_init(&dc, append_dn, ca);
    br_x509_decoder_push(&dc, ca->der, ca->der_len);
    if (br_x509_decoder_get_pkey(&dc) == NULL)
        return "cannot decode the certificate";
    if (!br_x509_decoder_isCA(&dc))
        return "not a CA certificate (basicConstraints has no cA TRUE)";
    if (ca->dn_len > sizeof(ca->dn) || ca->dn_len < 2)
        return "its subject name is too long";
    ca->not_after = ((int64_t)dc.notafter_days - DAYS_TO_EPOCH) * X509W_DAY + dc.notafter_seconds;
    /* The leaves' AKI must be the CA's own SKI, whatever way it was made;
     * a CA without one gets the SHA-1 of its key. */
    const unsigned char *v, *p, *id;
    size_t vlen, idlen;
    unsigned tag;
    if (tls_der_ext(ca->der, ca->der_len, oid_ski, sizeof(oid_ski), &v, &vlen)) {
        p = v;
        if (tls_der_next(&p, v + vlen, &tag, &id, &idlen) != 0 || tag != 0x04 || idlen == 0 ||
            idlen > sizeof(ca->key_id))
            return "its subjectKeyIdentifier is malformed";
        memcpy(ca->key_id, id, idlen);
        ca->key_id_len = idlen;
    } else {
        const br_x509_pkey *pk = br_x509_decoder_get_pkey(&dc);
        x509w_key_id(pk->key.ec.q, pk->key.ec.qlen, ca->key_id);
        ca->key_id_len = 20;
    }
    return NULL;
}

struct tls_ca *
tls_ca_load(const char *cert_path, const char *key_path, char *err, size_t errlen)
{
    char why[256];
    struct tls_ca *ca = NULL;
    char *cert_pem = read_text("CA certificate", cert_path, err, errlen);
    char *key_pem = cert_pem ? read_text("CA key", key_path, err, errlen) : NULL;
    if (key_pem == NULL)
        goto done;
    /* The server configuration's loader reads both PEM texts and checks
     * that the key is P-256 and the certificate's. */
    struct tls_server_cfg *cfg = tls_server_cfg_new_pem(cert_pem, key_pem, why, sizeof(why));
    if (cfg == NULL) {
        const char *w = strncmp(why, "tls: ", 5) == 0 ? why + 5 : why;
        if (strncmp(w, "private key", 11) == 0)
            snprintf(err, errlen, "tls: CA key %s: %s", key_path, w);
        else if (strncmp(w, "certificate", 11) == 0)
            snprintf(err, errlen, "tls: CA certificate %s: %s", cert_path, w);
        else
            snprintf(err, errlen, "tls: CA %s with key %s: %s", cert_path, key_path, w);
        goto done;
    }
    ca = calloc(1, sizeof(*ca));
    if (ca != NULL)
        ca->der = malloc(cfg->chain[0].data_len);
    if (ca == NULL || ca->der == NULL || cfg->sk.xlen > sizeof(ca->kbuf)) {
        snprintf(err, errlen, "tls: out of memory");
        goto fail;
    }
    ca->der_len = cfg->chain[0].data_len;
    memcpy(ca->der, cfg->chain[0].data, ca->der_len);
    ca->sk.curve = cfg->sk.curve;
    ca->sk.xlen = cfg->sk.xlen;
    ca->sk.x = ca->kbuf;
    memcpy(ca->kbuf, cfg->sk.x, cfg->sk.xlen);
    const char *bad = ca_inspect(ca);
    if (bad != NULL) {
        snprintf(err, errlen, "tls: CA certificate %s: %s", cert_path, bad);
        goto fail;
    }
    ca->pem = pem_of(ca->der, ca->der_len, "CERTIFICATE");
    if (ca->pem == NULL) {
        snprintf(err, errlen, "tls: out of memory");
        goto fail;
    }
    tls_server_cfg_free(cfg);
    goto done;
fail:
    tls_server_cfg_free(cfg);
    tls_ca_free(ca);
    ca = NULL;
done:
    if (key_pem != NULL)
        explicit_bzero(key_pem, strlen(key_pem));
    free(key_pem);
    free(cert_pem);
    return ca;
}

void
tls_ca_free(struct tls_ca *ca)
{
    if (ca == NULL)
        return;
    free(ca->der);
    free(ca->pem);
    explicit_bzero(ca, sizeof(*ca));
    free(ca);
}

const unsigned char *
tls_ca_der(const struct tls_ca *ca, size_t *len)
{
    *len = ca->der_len;
    return ca->der;
}

const char *
tls_ca_pem(const struct tls_ca *ca)
{
    return ca->pem;
}
