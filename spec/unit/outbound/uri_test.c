#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "outbound/uri.h"

/* Proxy URIs (outbound/uri.c): each form chute reads, and the ones it
 * refuses, with errors that never show the secret. */

static struct outbound_uri u;
static char err[400];

static int
parse(const char *s)
{
    err[0] = '\0';
    return outbound_uri_parse(s, strlen(s), &u, err, sizeof(err));
}

static void
test_ss_sip002_base64(void **st)
{
    /* base64("aes-128-gcm:pw-one") without padding, URL-safe */
    assert_int_equal(0, parse("ss://YWVzLTEyOC1nY206cHctb25l@198.51.100.7:8388#hk%20one"));
    assert_string_equal("shadowsocks", u.type);
    assert_string_equal("aes-128-gcm", u.cipher);
    assert_string_equal("pw-one", u.pass);
    assert_string_equal("198.51.100.7", u.server);
    assert_int_equal(8388, u.port);
    assert_string_equal("hk one", u.name);
    /* padded, with SIP002's "/?" and an unknown parameter */
    assert_int_equal(0, parse("ss://YWVzLTEyOC1nY206cHctb25l==@[2001:db8::1]:443/?x=1#v6"));
    assert_string_equal("2001:db8::1", u.server);
    assert_int_equal(443, u.port);
}

static void
test_ss_plain_userinfo(void **st)
{
    assert_int_equal(0, parse("ss://chacha20-ietf-poly1305:p%40ss%3Aword@host.example:1#n"));
    assert_string_equal("chacha20-ietf-poly1305", u.cipher);
    assert_string_equal("p@ss:word", u.pass);
    assert_string_equal("host.example", u.server);
}

static void
test_ss_legacy(void **st)
{
    /* base64("AES-256-GCM:secret@203.0.113.9:8389") */
    assert_int_equal(0, parse("ss://QUVTLTI1Ni1HQ006c2VjcmV0QDIwMy4wLjExMy45OjgzODk=#legacy"));
    assert_string_equal("aes-256-gcm", u.cipher); /* lower-cased */
    assert_string_equal("secret", u.pass);
    assert_string_equal("203.0.113.9", u.server);
    assert_int_equal(8389, u.port);
    assert_string_equal("legacy", u.name);
}

static void
test_ss_plugin_refused(void **st)
{
    assert_int_equal(-1, parse("ss://YWVzLTEyOC1nY206cHctb25l@198.51.100.7:8388/"
                               "?plugin=obfs-local%3Bobfs%3Dhttp#hk"));
    assert_non_null(strstr(err, "plugin=obfs-local is not supported"));
    assert_null(strstr(err, "YWVz")); /* the secret is masked */
    assert_non_null(strstr(err, "ss://***@198.51.100.7:8388"));
}

static void
test_trojan(void **st)
{
    assert_int_equal(0, parse("trojan://pa%23ss@tj.example:443?sni=cdn.example&allowInsecure=1"
                              "&type=tcp#Trojan%20%E2%9C%93"));
    assert_string_equal("trojan", u.type);
    assert_string_equal("pa#ss", u.pass);
    assert_string_equal("cdn.example", u.sni);
    assert_int_equal(1, u.skip_cert_verify);
    assert_string_equal("Trojan \xe2\x9c\x93", u.name);
    assert_int_equal(-1, parse("trojan://secretpw@tj.example:443?type=ws&path=/x#w"));
    assert_non_null(strstr(err, "type=ws is not supported"));
    assert_null(strstr(err, "secretpw"));
    assert_int_equal(-1, parse("trojan://tj.example:443"));
    assert_non_null(strstr(err, "needs a password"));
}

static void
test_socks_http(void **st)
{
    assert_int_equal(0, parse("socks5://u:p@127.0.0.1:1080#s"));
    assert_string_equal("socks5", u.type);
    assert_string_equal("u", u.user);
    assert_string_equal("p", u.pass);
    assert_int_equal(0, parse("socks5://10.0.0.1:1080"));
    assert_string_equal("", u.user);
    assert_int_equal(0, parse("https://a:b@proxy.example:8443/#tls"));
    assert_string_equal("https", u.type);
    assert_int_equal(0, parse("http://proxy.example:3128"));
    assert_string_equal("http", u.type);
    assert_int_equal(-1, parse("http://onlyuser@proxy.example:3128"));
    assert_non_null(strstr(err, "go together"));
}

static void
test_bad(void **st)
{
    const char *bad[] = {
        "vmess://eyJ2IjoiMiJ9",            /* another protocol */
        "ss://",                           /* nothing */
        "ss://YWVz@host:1",                /* no method:password */
        "socks5://host",                   /* no port */
        "socks5://host:0",
        "socks5://host:65536",
        "socks5://host:12a",
        "socks5://2001:db8::1:80",         /* v6 without brackets */
        "socks5://[2001:db8::1:80",
        "http://h:1/path",                 /* a path */
        "ss://a:b@h:1#%zz",                /* bad escape */
        "no scheme at all",
        "ss://YWVzLTEyOC1nY206cHctb25l@:8388",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(-1, parse(bad[i]));
        assert_true(strlen(err) > 0);
    }
    assert_int_equal(-1, parse("vmess://x"));
    assert_non_null(strstr(err, "scheme 'vmess'"));
}

static void
test_mask(void **st)
{
    char out[64];
    outbound_uri_mask("socks5://user:pw@h:1#n", 22, out, sizeof(out));
    assert_string_equal("socks5://***@h:1#n", out);
    outbound_uri_mask("ss://QUVTLTI1Ng==#x", 19, out, sizeof(out));
    assert_string_equal("ss://***#x", out);
    outbound_uri_mask("http://h:1/\x01\n", 13, out, sizeof(out));
    assert_string_equal("http://h:1/\\x01\\x0a", out);
    char longer[300];
    memset(longer, 'a', sizeof(longer));
    memcpy(longer, "http://", 7);
    outbound_uri_mask(longer, sizeof(longer), out, 20);
    assert_true(strlen(out) < 20);
    assert_non_null(strstr(out, "..."));
}

static void
test_b64(void **st)
{
    uint8_t out[16];
    assert_int_equal(3, outbound_b64_decode("YWJj", 4, out, sizeof(out)));
    assert_int_equal(2, outbound_b64_decode("YWI=", 4, out, sizeof(out)));
    assert_int_equal(2, outbound_b64_decode("YWI", 3, out, sizeof(out)));
    assert_int_equal(1, outbound_b64_decode("-w", 2, out, sizeof(out)));
    assert_int_equal(0xfb, out[0]);
    assert_int_equal(1, outbound_b64_decode("+w==", 4, out, sizeof(out)));
    assert_int_equal(-1, outbound_b64_decode("Y", 1, out, sizeof(out)));
    assert_int_equal(-1, outbound_b64_decode("YW=I", 4, out, sizeof(out)));
    assert_int_equal(-1, outbound_b64_decode("Y*Jj", 4, out, sizeof(out)));
    assert_int_equal(-1, outbound_b64_decode("YWJjYWJj", 8, out, 3));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ss_sip002_base64), cmocka_unit_test(test_ss_plain_userinfo),
        cmocka_unit_test(test_ss_legacy),        cmocka_unit_test(test_ss_plugin_refused),
        cmocka_unit_test(test_trojan),           cmocka_unit_test(test_socks_http),
        cmocka_unit_test(test_bad),              cmocka_unit_test(test_mask),
        cmocka_unit_test(test_b64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
