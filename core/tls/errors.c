#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tls/tls_int.h"

/* BearSSL's error codes in words a user can act on. BearSSL reports one
 * number (br_ssl_engine_last_error): an SSL code (1..31), an X.509 code
 * (32..62), or an alert the peer sent (256 + n) or we sent (512 + n).
 * Sentences name the peer by our role: a client talks to "the server". */

struct sentence {
    int code;
    const char *client; /* as a client sees it */
    const char *server; /* as a server sees it; NULL: the client's */
};

static const struct sentence codes[] = {
    {BR_ERR_BAD_PARAM, "bad TLS parameters (a chute bug: please report it)", NULL},
    {BR_ERR_BAD_STATE, "the TLS engine cannot go on (a chute bug: please report it)", NULL},
    {BR_ERR_UNSUPPORTED_VERSION,
     "the server offers only TLS 1.0 or 1.1 (BearSSL 0.6 speaks TLS 1.2 only)",
     "the client offers only TLS 1.0 or 1.1 (BearSSL 0.6 speaks TLS 1.2 only)"},
    {BR_ERR_BAD_VERSION, "the server changed its TLS version in mid-handshake",
     "the client changed its TLS version in mid-handshake"},
    {BR_ERR_BAD_LENGTH, "the server sent a record of impossible length (not TLS, or corrupted)",
     "the client sent a record of impossible length (not TLS, or corrupted)"},
    {BR_ERR_TOO_LARGE, "the server sent a record larger than TLS allows (not TLS, or corrupted)",
     "the client sent a record larger than TLS allows (not TLS, or corrupted)"},
    {BR_ERR_BAD_MAC, "a record from the server failed its integrity check (changed on the way?)",
     "a record from the client failed its integrity check (changed on the way?)"},
    {BR_ERR_NO_RANDOM, "no random source for TLS", NULL},
    {BR_ERR_UNKNOWN_TYPE, "the server sent a record of unknown type (not TLS?)",
     "the client sent a record of unknown type (not TLS?)"},
    {BR_ERR_UNEXPECTED, "the server sent a handshake message out of order (is it a TLS server?)",
     "the client sent a handshake message out of order"},
    {BR_ERR_BAD_CCS, "the server sent a malformed ChangeCipherSpec",
     "the client sent a malformed ChangeCipherSpec"},
    {BR_ERR_BAD_ALERT, "the server sent a malformed alert", "the client sent a malformed alert"},
    {BR_ERR_BAD_HANDSHAKE, "the server sent a malformed handshake message",
     "the client sent a malformed handshake message"},
    {BR_ERR_OVERSIZED_ID, "the server sent a session ID longer than 32 bytes",
     "the client sent a session ID longer than 32 bytes"},
    {BR_ERR_BAD_CIPHER_SUITE, "no cipher suite in common (the server chose one we did not offer)",
     "no cipher suite in common with the client"},
    {BR_ERR_BAD_COMPRESSION, "the server wants TLS compression, which is refused",
     "the client offers no null compression"},
    {BR_ERR_BAD_FRAGLEN, "the server sent a bad maximum fragment length",
     "the client sent a bad maximum fragment length"},
    {BR_ERR_BAD_SECRENEG, "the server's secure renegotiation data is wrong",
     "the client's secure renegotiation data is wrong"},
    {BR_ERR_EXTRA_EXTENSION, "the server sent an extension we did not ask for",
     "the client sent an extension twice or out of place"},
    {BR_ERR_BAD_SNI, "the server sent a malformed server name (SNI)",
     "the client sent a malformed server name (SNI)"},
    {BR_ERR_BAD_HELLO_DONE, "the server sent a malformed ServerHelloDone", NULL},
    {BR_ERR_LIMIT_EXCEEDED,
     "the server sent more than BearSSL handles (a certificate or a key too large?)",
     "the client sent more than BearSSL handles"},
    {BR_ERR_BAD_FINISHED, "the server's Finished message did not verify (a broken peer, or "
                          "someone in the middle)",
     "the client's Finished message did not verify (a broken peer, or someone in the middle)"},
    {BR_ERR_RESUME_MISMATCH, "the server resumed a session with other parameters", NULL},
    {BR_ERR_INVALID_ALGORITHM, "the server used an algorithm it may not use here",
     "the client used an algorithm it may not use here"},
    {BR_ERR_BAD_SIGNATURE, "the server's key exchange signature did not verify",
     "the client's signature did not verify"},
    {BR_ERR_WRONG_KEY_USAGE, "the server's certificate key may not be used for this key exchange",
     "the client's certificate key may not be used for signing"},
    {BR_ERR_NO_CLIENT_AUTH, "the server asks for a client certificate, and chute has none to give",
     "the client sent no certificate"},
    {BR_ERR_IO, "the connection failed during the handshake", NULL},

    {BR_ERR_X509_EMPTY_CHAIN, "the server sent no certificate", "the client sent no certificate"},
    {BR_ERR_X509_UNSUPPORTED,
     "the server's certificate uses an algorithm BearSSL does not support", NULL},
    {BR_ERR_X509_LIMIT_EXCEEDED, "the server's certificate chain is too long or too large", NULL},
    {BR_ERR_X509_WRONG_KEY_TYPE, "the server's certificate key does not fit the cipher suite",
     NULL},
    {BR_ERR_X509_BAD_SIGNATURE, "a certificate's signature in the server's chain did not verify",
     NULL},
    {BR_ERR_X509_TIME_UNKNOWN, "the clock is unknown: certificate dates cannot be checked", NULL},
    {BR_ERR_X509_EXPIRED, "certificate expired or not yet valid", NULL},
    {BR_ERR_X509_DN_MISMATCH,
     "the server's chain is out of order (a certificate's issuer is not the next one's subject)",
     NULL},
    {BR_ERR_X509_BAD_SERVER_NAME, "host name does not match the certificate", NULL},
    {BR_ERR_X509_CRITICAL_EXTENSION,
     "the certificate has a critical extension BearSSL cannot check", NULL},
    {BR_ERR_X509_NOT_CA, "a certificate that signs another in the server's chain is not a CA",
     NULL},
    {BR_ERR_X509_FORBIDDEN_KEY_USAGE, "the certificate's key usage forbids this use", NULL},
    {BR_ERR_X509_WEAK_PUBLIC_KEY, "the certificate's key is too weak", NULL},
    {BR_ERR_X509_NOT_TRUSTED,
     "certificate not trusted: unknown issuer (a private CA? give it with ca = \"file.pem\")",
     NULL},
};

/* Alerts (RFC 5246 §7.2, RFC 7301): what the peer meant by one. */
static const struct sentence alerts[] = {
    {BR_ALERT_UNEXPECTED_MESSAGE, "unexpected_message: it did not expect our message", NULL},
    {BR_ALERT_BAD_RECORD_MAC, "bad_record_mac: our record failed its integrity check", NULL},
    {BR_ALERT_RECORD_OVERFLOW, "record_overflow: our record was too large", NULL},
    {BR_ALERT_DECOMPRESSION_FAILURE, "decompression_failure", NULL},
    {BR_ALERT_HANDSHAKE_FAILURE,
     "handshake_failure: no cipher suite or parameters in common (TLS 1.3 only?)", NULL},
    {BR_ALERT_BAD_CERTIFICATE, "bad_certificate: it refuses the certificate", NULL},
    {BR_ALERT_UNSUPPORTED_CERTIFICATE, "unsupported_certificate", NULL},
    {BR_ALERT_CERTIFICATE_REVOKED, "certificate_revoked", NULL},
    {BR_ALERT_CERTIFICATE_EXPIRED, "certificate_expired", NULL},
    {BR_ALERT_CERTIFICATE_UNKNOWN, "certificate_unknown: it does not trust the certificate", NULL},
    {BR_ALERT_ILLEGAL_PARAMETER, "illegal_parameter", NULL},
    {BR_ALERT_UNKNOWN_CA, "unknown_ca: it does not trust the certificate's issuer", NULL},
    {BR_ALERT_ACCESS_DENIED, "access_denied", NULL},
    {BR_ALERT_DECODE_ERROR, "decode_error: it could not parse our message", NULL},
    {BR_ALERT_DECRYPT_ERROR, "decrypt_error", NULL},
    {BR_ALERT_PROTOCOL_VERSION, "protocol_version: it wants another TLS version (1.3 only?)",
     NULL},
    {BR_ALERT_INSUFFICIENT_SECURITY, "insufficient_security: it wants stronger cipher suites",
     NULL},
    {BR_ALERT_INTERNAL_ERROR, "internal_error: its own failure", NULL},
    {BR_ALERT_USER_CANCELED, "user_canceled", NULL},
    {BR_ALERT_NO_RENEGOTIATION, "no_renegotiation", NULL},
    {BR_ALERT_UNSUPPORTED_EXTENSION, "unsupported_extension", NULL},
    {112, "unrecognized_name: it does not serve this name (check sni)", NULL},
    {BR_ALERT_NO_APPLICATION_PROTOCOL, "no_application_protocol: no ALPN protocol in common", NULL},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const struct sentence *
find(const struct sentence *t, size_t n, int code)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].code == code)
            return &t[i];
    return NULL;
}

/* see tls_int.h */
const char *
tls_error_sentence(int e, int server, char *buf, size_t n)
{
    const struct sentence *s;
    if (e >= BR_ERR_X509_INVALID_VALUE && e <= BR_ERR_X509_BAD_TIME)
        return server ? "the client's certificate is malformed"
                      : "the server's certificate is malformed (not DER X.509)";
    if (e >= BR_ERR_RECV_FATAL_ALERT && e < BR_ERR_SEND_FATAL_ALERT + 256) {
        int sent = e >= BR_ERR_SEND_FATAL_ALERT;
        int alert = e - (sent ? BR_ERR_SEND_FATAL_ALERT : BR_ERR_RECV_FATAL_ALERT);
        const char *peer = server ? "client" : "server";
        s = find(alerts, COUNT(alerts), alert);
        if (sent) /* the meaning is the receiver's: only the name */
            snprintf(buf, n, "chute ended the handshake with alert %d (%.*s)", alert,
                     s ? (int)strcspn(s->client, ":") : 7, s ? s->client : "unknown");
        else if (s != NULL)
            snprintf(buf, n, "the %s sent alert %d, %s", peer, alert, s->client);
        else
            snprintf(buf, n, "the %s sent alert %d", peer, alert);
        return buf;
    }
    s = find(codes, COUNT(codes), e);
    if (s == NULL)
        return NULL;
    return server && s->server != NULL ? s->server : s->client;
}

/* see tls_int.h */
int
tls_bytes_not_tls(const unsigned char *p, size_t n)
{
    /* A record starts with its type (20..24: ChangeCipherSpec, alert,
     * handshake, application data, heartbeat) and major version 3. An
     * SSLv2-style hello (top bit set) is TLS enough to be refused as such. */
    if (n >= 1 && (p[0] & 0x80))
        return 0;
    return (n >= 1 && (p[0] < 20 || p[0] > 24)) || (n >= 2 && p[1] != 3);
}

/* Steps into the constructed element at *p without needing all of it
 * (a certificate's start is enough): 0 with *p at its first child. */
static int
enter(const unsigned char **p, const unsigned char *end, unsigned tag)
{
    const unsigned char *q = *p;
    if (end - q < 2 || q[0] != tag)
        return -1;
    size_t l = q[1];
    q += 2;
    if (l & 0x80) {
        size_t n = l & 0x7f;
        if (n == 0 || n > 4 || (size_t)(end - q) < n)
            return -1;
        q += n;
    }
    *p = q;
    return 0;
}

static int
digits(const unsigned char *p, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* UTCTime (0x17, YYMMDDHHMMSSZ) or GeneralizedTime (0x18,
 * YYYYMMDDHHMMSSZ), the only forms RFC 5280 §4.1.2.5 allows; years before
 * 1950 are no certificate's. */
static int
der_time(unsigned tag, const unsigned char *v, size_t l, long long *out)
{
    struct tm tm = {0};
    int year;
    if (tag == 0x17 && l == 13) {
        year = digits(v, 2);
        year += year < 50 ? 2000 : 1900;
        v += 2;
    } else if (tag == 0x18 && l == 15) {
        year = digits(v, 4);
        v += 4;
    } else {
        return -1;
    }
    int mon = digits(v, 2), day = digits(v + 2, 2), h = digits(v + 4, 2), m = digits(v + 6, 2),
        s = digits(v + 8, 2);
    if (year < 1950 || mon < 1 || mon > 12 || day < 1 || day > 31 || h < 0 || h > 23 || m < 0 ||
        m > 59 || s < 0 || s > 60 || v[10] != 'Z')
        return -1;
    tm.tm_year = year - 1900;
    tm.tm_mon = mon - 1;
    tm.tm_mday = day;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = s;
    *out = (long long)timegm(&tm);
    return 0;
}

/* see tls_int.h */
int
tls_der_validity(const unsigned char *der, size_t len, long long *not_before,
                 long long *not_after)
{
    const unsigned char *p = der, *end = der + len, *v;
    size_t l;
    unsigned tag;
    if (enter(&p, end, 0x30) != 0 || enter(&p, end, 0x30) != 0) /* Certificate, TBS */
        return -1;
    if (p < end && *p == 0xa0 && tls_der_next(&p, end, &tag, &v, &l) != 0) /* version */
        return -1;
    for (int i = 0; i < 3; i++) /* serialNumber, signature, issuer */
        if (tls_der_next(&p, end, &tag, &v, &l) != 0)
            return -1;
    if (tls_der_next(&p, end, &tag, &v, &l) != 0 || tag != 0x30) /* Validity */
        return -1;
    const unsigned char *q = v, *qend = v + l;
    if (tls_der_next(&q, qend, &tag, &v, &l) != 0 || der_time(tag, v, l, not_before) != 0 ||
        tls_der_next(&q, qend, &tag, &v, &l) != 0 || der_time(tag, v, l, not_after) != 0)
        return -1;
    return 0;
}

/* see tls_int.h */
void
tls_time_text(long long t, char *buf, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm) == NULL || strftime(buf, n, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
        snprintf(buf, n, "%lld", t);
}
