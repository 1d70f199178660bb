/* BearSSL's codes in words (core/tls/errors.c): every code a user can hit
 * has a sentence, alerts say who sent which, and a certificate's dates
 * are read for "certificate expired on <date>". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tls/tls_int.h"

static void
test_every_code_has_a_sentence(void **state)
{
    char buf[128];
    /* Every code bearssl_ssl.h and bearssl_x509.h define past OK. */
    static const int all[] = {
        1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
        23, 24, 25, 26, 27, 28, 29, 31, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45,
        46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 62,
    };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        for (int server = 0; server < 2; server++) {
            const char *s = tls_error_sentence(all[i], server, buf, sizeof(buf));
            if (s == NULL || s[0] == '\0' || strstr(s, "error") == s)
                fail_msg("code %d (server %d): no sentence", all[i], server);
        }
    }
    assert_null(tls_error_sentence(11, 0, buf, sizeof(buf))); /* not a BearSSL code */
    assert_null(tls_error_sentence(61, 0, buf, sizeof(buf)));
}

static void
test_sentences(void **state)
{
    char buf[128];
    assert_string_equal(tls_error_sentence(BR_ERR_X509_NOT_TRUSTED, 0, buf, sizeof(buf)),
                        "certificate not trusted: unknown issuer (a private CA? give it with "
                        "ca = \"file.pem\")");
    assert_string_equal(tls_error_sentence(BR_ERR_X509_BAD_SERVER_NAME, 0, buf, sizeof(buf)),
                        "host name does not match the certificate");
    assert_string_equal(tls_error_sentence(BR_ERR_BAD_CIPHER_SUITE, 1, buf, sizeof(buf)),
                        "no cipher suite in common with the client");
    assert_string_equal(tls_error_sentence(BR_ERR_UNSUPPORTED_VERSION, 0, buf, sizeof(buf)),
                        "the server offers only TLS 1.0 or 1.1 (BearSSL 0.6 speaks TLS 1.2 only)");
    /* The role picks the peer's name. */
    assert_non_null(strstr(tls_error_sentence(BR_ERR_BAD_MAC, 0, buf, sizeof(buf)), "server"));
    assert_non_null(strstr(tls_error_sentence(BR_ERR_BAD_MAC, 1, buf, sizeof(buf)), "client"));
    /* Malformed certificates share one sentence. */
    assert_string_equal(tls_error_sentence(BR_ERR_X509_BAD_TAG_VALUE, 0, buf, sizeof(buf)),
                        "the server's certificate is malformed (not DER X.509)");
}

static void
test_alerts(void **state)
{
    char buf[128];
    const char *s = tls_error_sentence(BR_ERR_RECV_FATAL_ALERT + 40, 0, buf, sizeof(buf));
    assert_string_equal(s, "the server sent alert 40, handshake_failure: no cipher suite or "
                           "parameters in common (TLS 1.3 only?)");
    assert_ptr_equal(s, buf);
    assert_string_equal(tls_error_sentence(BR_ERR_RECV_FATAL_ALERT + 112, 0, buf, sizeof(buf)),
                        "the server sent alert 112, unrecognized_name: it does not serve this "
                        "name (check sni)");
    assert_string_equal(tls_error_sentence(BR_ERR_RECV_FATAL_ALERT + 48, 1, buf, sizeof(buf)),
                        "the client sent alert 48, unknown_ca: it does not trust the "
                        "certificate's issuer");
    assert_string_equal(tls_error_sentence(BR_ERR_RECV_FATAL_ALERT + 200, 0, buf, sizeof(buf)),
                        "the server sent alert 200");
    assert_string_equal(tls_error_sentence(BR_ERR_SEND_FATAL_ALERT + 120, 1, buf, sizeof(buf)),
                        "chute ended the handshake with alert 120 (no_application_protocol)");
    /* Cut to the buffer, never past it. */
    char small[16];
    s = tls_error_sentence(BR_ERR_RECV_FATAL_ALERT + 40, 0, small, sizeof(small));
    assert_int_equal(strlen(s), sizeof(small) - 1);
}

static void
test_not_tls(void **state)
{
    assert_true(tls_bytes_not_tls((const unsigned char *)"HTTP/1.1", 8));
    assert_true(tls_bytes_not_tls((const unsigned char *)"SSH-2.0", 1));
    static const unsigned char alert[] = {21, 3, 3, 0, 2};
    static const unsigned char hello[] = {22, 3, 1};
    static const unsigned char badver[] = {22, 2};
    static const unsigned char v2[] = {0x80, 0x2e};
    assert_false(tls_bytes_not_tls(alert, sizeof(alert)));
    assert_false(tls_bytes_not_tls(hello, sizeof(hello)));
    assert_false(tls_bytes_not_tls(hello, 1));
    assert_true(tls_bytes_not_tls(badver, sizeof(badver)));
    assert_false(tls_bytes_not_tls(v2, sizeof(v2)));
}

/* A certificate's start, as far as the validity: SEQ, TBS SEQ, version,
 * serial, signature, issuer, then the validity of |nb| / |na| (UTCTime or
 * GeneralizedTime by their length). The outer lengths claim more than is
 * there, as the start of a real certificate does. */
static size_t
cert_start(unsigned char *out, const char *nb, const char *na)
{
    unsigned char *p = out;
    static const unsigned char head[] = {
        0x30, 0x82, 0x02, 0x00,                   /* Certificate */
        0x30, 0x82, 0x01, 0x80,                   /* TBSCertificate */
        0xa0, 0x03, 0x02, 0x01, 0x02,             /* [0] version 3 */
        0x02, 0x01, 0x07,                         /* serialNumber */
        0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02, /* ecdsa-sha256 */
        0x30, 0x00,                               /* issuer (empty) */
    };
    memcpy(p, head, sizeof(head));
    p += sizeof(head);
    size_t lb = strlen(nb), la = strlen(na);
    *p++ = 0x30;
    *p++ = (unsigned char)(4 + lb + la);
    *p++ = lb == 13 ? 0x17 : 0x18;
    *p++ = (unsigned char)lb;
    memcpy(p, nb, lb);
    p += lb;
    *p++ = la == 13 ? 0x17 : 0x18;
    *p++ = (unsigned char)la;
    memcpy(p, na, la);
    p += la;
    return (size_t)(p - out);
}

static void
test_validity(void **state)
{
    unsigned char der[128];
    long long nb, na;
    char text[40];
    size_t n = cert_start(der, "200101000000Z", "20491231235959Z");
    assert_int_equal(tls_der_validity(der, n, &nb, &na), 0);
    assert_int_equal(nb, 1577836800LL);  /* 2020-01-01 00:00:00 UTC */
    assert_int_equal(na, 2524607999LL);  /* 2049-12-31 23:59:59 UTC */
    tls_time_text(na, text, sizeof(text));
    assert_string_equal(text, "2049-12-31 23:59:59 UTC");
    /* UTCTime years of 50 and later are 19xx (RFC 5280 §4.1.2.5.1). */
    n = cert_start(der, "500101000000Z", "491231235959Z");
    assert_int_equal(tls_der_validity(der, n, &nb, &na), 0);
    tls_time_text(nb, text, sizeof(text));
    assert_string_equal(text, "1950-01-01 00:00:00 UTC");
    /* Cut short, or not a time: no answer rather than a wrong one. */
    n = cert_start(der, "200101000000Z", "20491231235959Z");
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(tls_der_validity(der, cut, &nb, &na), -1);
    n = cert_start(der, "200101000000Z", "20491231235959Z");
    der[n - 20] = 'x';
    assert_int_equal(tls_der_validity(der, n, &nb, &na), -1);
    n = cert_start(der, "201301000000Z", "20491231235959Z"); /* month 13 */
    assert_int_equal(tls_der_validity(der, n, &nb, &na), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_code_has_a_sentence),
        cmocka_unit_test(test_sentences),
        cmocka_unit_test(test_alerts),
        cmocka_unit_test(test_not_tls),
        cmocka_unit_test(test_validity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
