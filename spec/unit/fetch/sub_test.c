#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fetch/fetch.h"
#include "fetch/sub.h"

/* Subscription bodies (fetch/sub.c): the three forms, what is left out
 * and why, and bodies that are none of them. Also the URL and cache-path
 * helpers the provider and rule-set loaders use. */

struct got {
    struct outbound_uri p[16];
    unsigned line[16];
    size_t n;
    char skips[8][320];
    size_t nskips;
};

static void
on_proxy(void *arg, const struct outbound_uri *p, unsigned line)
{
    struct got *g = arg;
    if (g->n < 16) {
        g->line[g->n] = line;
        g->p[g->n++] = *p;
    }
}

static void
on_skip(void *arg, unsigned line, const char *why)
{
    struct got *g = arg;
    if (g->nskips < 8)
        snprintf(g->skips[g->nskips++], sizeof(g->skips[0]), "%u: %s", line, why);
}

static const struct fetch_sub_ops ops = {on_proxy, on_skip};
static struct got g;
static char err[400];
static enum fetch_sub_format fmt;

static long
decode(const char *s)
{
    memset(&g, 0, sizeof(g));
    err[0] = '\0';
    return fetch_sub_decode(s, strlen(s), &ops, &g, &fmt, err, sizeof(err));
}

static void
test_clash(void **st)
{
    const char *y = "port: 7890\n"
                    "anchors:\n"
                    "  base: &b { server: 198.51.100.1, udp: true }\n"
                    "proxies:\n"
                    "  - { name: hk, type: ss, server: 198.51.100.7, port: 8388, cipher: "
                    "aes-128-gcm, password: \"p w\" }\n"
                    "  - name: tj\n"
                    "    type: trojan\n"
                    "    server: tj.example\n"
                    "    port: 443\n"
                    "    password: secret\n"
                    "    sni: cdn.example\n"
                    "    skip-cert-verify: true\n"
                    "  - name: vm\n"
                    "    type: vmess\n"
                    "    server: 1.2.3.4\n"
                    "    port: 443\n"
                    "  - name: ob\n"
                    "    type: ss\n"
                    "    server: 1.2.3.4\n"
                    "    port: 1\n"
                    "    cipher: aes-128-gcm\n"
                    "    password: x\n"
                    "    plugin: obfs\n"
                    "  - <<: *b\n"
                    "    name: merged\n"
                    "    type: socks5\n"
                    "    port: 1080\n"
                    "  - name: web\n"
                    "    type: http\n"
                    "    server: h.example\n"
                    "    port: 8443\n"
                    "    tls: true\n";
    assert_int_equal(4, decode(y));
    assert_int_equal(FETCH_SUB_CLASH, fmt);
    assert_string_equal("hk", g.p[0].name);
    assert_string_equal("shadowsocks", g.p[0].type);
    assert_string_equal("p w", g.p[0].pass);
    assert_int_equal(5, g.line[0]);
    assert_string_equal("trojan", g.p[1].type);
    assert_string_equal("cdn.example", g.p[1].sni);
    assert_int_equal(1, g.p[1].skip_cert_verify);
    assert_string_equal("merged", g.p[2].name);
    assert_string_equal("198.51.100.1", g.p[2].server); /* from the merge key */
    assert_int_equal(1, g.p[2].udp);
    assert_string_equal("https", g.p[3].type);
    assert_int_equal(2, g.nskips);
    assert_non_null(strstr(g.skips[0], "type vmess is not supported"));
    assert_non_null(strstr(g.skips[1], "plugin obfs is not supported"));
}

static void
test_lines_and_base64(void **st)
{
    const char *lines = "# my nodes\r\n"
                        "ss://YWVzLTEyOC1nY206cHctb25l@198.51.100.7:8388#a\r\n"
                        "\r\n"
                        "trojan://pw@tj.example:443#b\r\n"
                        "vmess://eyJ2IjoiMiJ9\r\n";
    assert_int_equal(2, decode(lines));
    assert_int_equal(FETCH_SUB_LINES, fmt);
    assert_string_equal("a", g.p[0].name);
    assert_int_equal(4, g.line[1]);
    assert_int_equal(1, g.nskips);
    assert_non_null(strstr(g.skips[0], "5: vmess://"));
    /* the same text, base64: standard with padding, then URL-safe without */
    char b64[1024];
    const char *text = "ss://YWVzLTEyOC1nY206cHctb25l@198.51.100.7:8388#a\n"
                       "socks5://u:p@10.0.0.1:1080#s?\n";
    static const char tab[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(text), o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)text[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)(unsigned char)text[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)text[i + 2];
        b64[o++] = tab[v >> 18];
        b64[o++] = tab[(v >> 12) & 63];
        b64[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        b64[o++] = i + 2 < n ? tab[v & 63] : '=';
        if (o % 77 == 76)
            b64[o++] = '\n'; /* MIME-style wrapping */
    }
    b64[o] = '\0';
    assert_int_equal(2, decode(b64));
    assert_int_equal(FETCH_SUB_BASE64, fmt);
    assert_string_equal("s?", g.p[1].name);
    for (size_t i = 0; i < o; i++) {
        if (b64[i] == '+')
            b64[i] = '-';
        else if (b64[i] == '/')
            b64[i] = '_';
        else if (b64[i] == '=')
            b64[i] = '\0';
    }
    assert_int_equal(2, decode(b64));
}

static void
test_not_a_subscription(void **st)
{
    static const struct {
        const char *body, *says;
    } cases[] = {
        {"<!DOCTYPE html><html>login</html>", "HTML page"},
        {"{\"outbounds\": []}", "JSON"},
        {"[Proxy]\nhk = ss, 1.2.3.4, 1\n", "INI/Surge profile"},
        {"payload:\n  - DOMAIN,a.com\n", "rule list"},
        {"mode: rule\nport: 7890\n", "without a top-level proxies: list"},
        {"", "empty"},
        {"proxies: 12\n", "proxies: is not a list"},
        {"proxies:\n  - { name: x, type: vmess, server: a, port: 1 }\n", "no proxy chute can use"},
        {"proxies:\n - [unclosed\n", "not valid YAML"},
        {"QUJDREVGR0g=", "its text is not URI lines"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(-1, decode(cases[i].body));
        if (strstr(err, cases[i].says) == NULL)
            fail_msg("case %zu: '%s' does not say '%s'", i, err, cases[i].says);
    }
    assert_int_equal(-1, fetch_sub_decode("a\0b", 3, &ops, &g, NULL, err, sizeof(err)));
    assert_non_null(strstr(err, "binary"));
}

static void
test_url(void **st)
{
    struct fetch_url u;
    char e[200];
    assert_int_equal(0, fetch_url_parse("https://h.example/a/b?t=1#x", &u, e, sizeof(e)));
    assert_int_equal(1, u.https);
    assert_int_equal(443, u.port);
    assert_string_equal("/a/b?t=1", u.path);
    assert_int_equal(0, fetch_url_parse("http://[::1]:8080", &u, e, sizeof(e)));
    assert_string_equal("::1", u.host);
    assert_string_equal("[::1]:8080", u.authority);
    assert_string_equal("/", u.path);
    assert_int_equal(0, fetch_url_parse("http://h?x", &u, e, sizeof(e)));
    assert_string_equal("/?x", u.path);
    assert_int_equal(-1, fetch_url_parse("ftp://h/x", &u, e, sizeof(e)));
    assert_int_equal(-1, fetch_url_parse("http://u:p@h/x", &u, e, sizeof(e)));
    assert_int_equal(-1, fetch_url_parse("http://h:99999/", &u, e, sizeof(e)));
    assert_int_equal(-1, fetch_url_parse("http://h/a b", &u, e, sizeof(e)));
    char shown[100];
    fetch_url_shown("https://h/sub?token=SECRET", shown, sizeof(shown));
    assert_string_equal("https://h/sub?...", shown);
}

static void
test_cache_path(void **st)
{
    char out[4096], e[200];
    setenv("CHUTE_STATE_DIR", "/state", 1);
    assert_int_equal(0, fetch_cache_path(NULL, "provider", "my sub/1", out, sizeof(out), e,
                                         sizeof(e)));
    assert_string_equal("/state/cache/provider-my_sub_1", out);
    assert_int_equal(0, fetch_cache_path("rules/ads.list", "ruleset", "x", out, sizeof(out), e,
                                         sizeof(e)));
    assert_string_equal("/state/cache/rules/ads.list", out);
    assert_int_equal(0, fetch_cache_path("/abs/x", "ruleset", "x", out, sizeof(out), e, sizeof(e)));
    assert_string_equal("/abs/x", out);
    assert_int_equal(-1, fetch_cache_path("../x", "ruleset", "x", out, sizeof(out), e, sizeof(e)));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clash), cmocka_unit_test(test_lines_and_base64),
        cmocka_unit_test(test_not_a_subscription), cmocka_unit_test(test_url),
        cmocka_unit_test(test_cache_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
