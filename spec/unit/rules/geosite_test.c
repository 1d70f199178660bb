/* The geosite.dat decoder (rules/geosite.h) on protobuf built here byte
 * by byte, as protoc encodes it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rules/geosite.h"

struct buf {
    uint8_t b[4096];
    size_t n;
};

static void
put_varint(struct buf *o, uint64_t v)
{
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        o->b[o->n++] = c | (v ? 0x80 : 0);
    } while (v);
}

static void
put_len(struct buf *o, unsigned field, const void *p, size_t n)
{
    put_varint(o, field << 3 | 2);
    put_varint(o, n);
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void
put_str(struct buf *o, unsigned field, const char *s)
{
    put_len(o, field, s, strlen(s));
}

/* A Domain: type (omitted when 0, as proto3 does), value, attribute keys. */
static void
put_domain(struct buf *site, unsigned type, const char *value, const char *attrs)
{
    struct buf d = {.n = 0};
    if (type != 0) {
        put_varint(&d, 1 << 3);
        put_varint(&d, type);
    }
    put_str(&d, 2, value);
    for (const char *a = attrs; a != NULL && *a;) {
        const char *end = strchr(a, ',');
        size_t n = end ? (size_t)(end - a) : strlen(a);
        struct buf at = {.n = 0};
        put_len(&at, 1, a, n);
        put_varint(&at, 2 << 3);
        put_varint(&at, 1);
        put_len(&d, 3, at.b, at.n);
        a += n + (end != NULL);
    }
    put_len(site, 2, d.b, d.n);
}

struct got {
    char text[2048];
};

static int
collect(void *arg, size_t want, enum rules_geosite_kind kind, struct mem_slice v)
{
    struct got *g = arg;
    size_t n = strlen(g->text);
    snprintf(g->text + n, sizeof(g->text) - n, "%zu:%d:%.*s ", want, (int)kind, (int)v.len, v.ptr);
    return 0;
}

static void
want(struct rules_geosite_want *w, const char *name)
{
    char msg[160];
    assert_int_equal(rules_geosite_want_parse(mem_slice(name, strlen(name)), w, msg, sizeof(msg)),
                     0);
}

/* A file of three sites: CN, GOOGLE (with @cn attributes) and ADS. */
static void
sample(struct buf *file)
{
    struct buf s = {.n = 0};
    put_str(&s, 1, "CN");
    put_domain(&s, 2, "example.cn", NULL);
    put_domain(&s, 3, "www.full.cn", NULL);
    put_len(file, 1, s.b, s.n);
    s.n = 0;
    put_str(&s, 1, "GOOGLE");
    put_domain(&s, 2, "google.com", NULL);
    put_domain(&s, 2, "google.cn", "cn");
    put_domain(&s, 1, "^g[0-9]+\\.cn$", "cn,ads");
    put_len(file, 1, s.b, s.n);
    s.n = 0;
    put_domain(&s, 0, "doubleclick", NULL); /* the code after its domains */
    put_str(&s, 1, "ADS");
    put_len(file, 1, s.b, s.n);
}

static void
test_wanted_only(void **state)
{
    (void)state;
    struct buf f = {.n = 0};
    struct rules_geosite_want w[4];
    struct got g = {""};
    size_t total = 0;
    sample(&f);
    want(&w[0], "cn");
    want(&w[1], "Ads");
    assert_int_equal(rules_geosite_read(f.b, f.n, w, 2, collect, &g, &total, NULL), 0);
    assert_string_equal(g.text, "0:2:example.cn 0:3:www.full.cn 1:0:doubleclick ");
    assert_int_equal(total, 3);
    assert_int_equal(w[0].sites, 1);
    assert_int_equal(w[0].domains, 2);
    assert_int_equal(w[1].domains, 1);
}

static void
test_attributes(void **state)
{
    (void)state;
    struct buf f = {.n = 0};
    struct rules_geosite_want w[3];
    struct got g = {""};
    sample(&f);
    want(&w[0], "google@CN");
    want(&w[1], "google@cn@ads");
    want(&w[2], "google");
    assert_int_equal(rules_geosite_read(f.b, f.n, w, 3, collect, &g, NULL, NULL), 0);
    assert_string_equal(g.text, "2:2:google.com 0:2:google.cn 2:2:google.cn 0:1:^g[0-9]+\\.cn$ "
                                "1:1:^g[0-9]+\\.cn$ 2:1:^g[0-9]+\\.cn$ ");
    assert_int_equal(w[1].domains, 1);
}

static void
test_unknown_fields_and_missing(void **state)
{
    (void)state;
    struct buf f = {.n = 0}, s = {.n = 0};
    /* Fields of every wire type the format does not define are skipped. */
    put_varint(&f, 9 << 3 | 0);
    put_varint(&f, 300);
    put_varint(&f, 10 << 3 | 1);
    memset(f.b + f.n, 0xee, 8);
    f.n += 8;
    put_varint(&f, 11 << 3 | 5);
    memset(f.b + f.n, 0xee, 4);
    f.n += 4;
    put_str(&s, 1, "X");
    put_str(&s, 4, "X"); /* v2fly's code = 4 */
    put_domain(&s, 2, "x.test", NULL);
    put_len(&f, 1, s.b, s.n);
    struct rules_geosite_want w[2];
    struct got g = {""};
    want(&w[0], "x");
    want(&w[1], "absent");
    assert_int_equal(rules_geosite_read(f.b, f.n, w, 2, collect, &g, NULL, NULL), 0);
    assert_string_equal(g.text, "0:2:x.test ");
    assert_int_equal(w[1].sites, 0);
    /* An empty file has no site. */
    size_t total = 9;
    assert_int_equal(rules_geosite_read("", 0, w, 2, collect, &g, &total, NULL), 0);
    assert_int_equal(total, 0);
}

static void
test_empty_value_and_stop(void **state)
{
    (void)state;
    struct buf f = {.n = 0}, s = {.n = 0};
    put_str(&s, 1, "E");
    put_domain(&s, 0, "", NULL); /* would match every name as a keyword */
    put_domain(&s, 2, "e.test", NULL);
    put_len(&f, 1, s.b, s.n);
    struct rules_geosite_want w;
    struct got g = {""};
    want(&w, "e");
    assert_int_equal(rules_geosite_read(f.b, f.n, &w, 1, collect, &g, NULL, NULL), 0);
    assert_string_equal(g.text, "0:2:e.test ");
    assert_int_equal(w.empty, 1);
}

static int
stop(void *arg, size_t want, enum rules_geosite_kind kind, struct mem_slice v)
{
    (void)arg, (void)want, (void)kind, (void)v;
    return 7;
}

static void
expect_error(const uint8_t *p, size_t n, size_t offset, const char *msg)
{
    struct rules_geosite_want w;
    struct rules_geosite_error err;
    want(&w, "cn");
    assert_int_equal(rules_geosite_read(p, n, &w, 1, NULL, NULL, NULL, &err),
                     RULES_GEOSITE_ERR_FORMAT);
    assert_string_equal(err.msg, msg);
    assert_int_equal(err.offset, offset);
}

static void
test_errors(void **state)
{
    (void)state;
    struct buf f = {.n = 0};
    sample(&f);
    struct rules_geosite_want w;
    want(&w, "cn");
    assert_int_equal(rules_geosite_read(f.b, f.n, &w, 1, stop, NULL, NULL, NULL), 7);
    /* Every cut of the sample is refused, never read past. */
    for (size_t n = 1; n < f.n; n++) {
        struct rules_geosite_error err;
        int rc = rules_geosite_read(f.b, n, &w, 1, NULL, NULL, NULL, &err);
        if (rc == 0) /* a cut between two sites is a smaller file */
            continue;
        assert_int_equal(rc, RULES_GEOSITE_ERR_FORMAT);
        assert_true(err.offset <= n); /* the missing byte may be the first one past the end */
        assert_true(err.msg[0] != '\0');
    }
    expect_error((const uint8_t *)"\x0a", 1, 1, "truncated varint"); /* its length */
    expect_error((const uint8_t *)"\x0a\x05" "ab", 4, 0, "field 1: length 5 past the end (2 bytes left)");
    expect_error((const uint8_t *)"\x0b", 1, 0, "field 1: wire type 3 (not a geosite.dat?)");
    expect_error((const uint8_t *)"\x08\x01", 2, 0, "site (field 1) has wire type 0, not 2");
    expect_error((const uint8_t *)"\x00", 1, 0, "field number 0");
    expect_error((const uint8_t *)"\x48\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 11, 1,
                 "varint over 64 bits");
    /* Inside a wanted site: a domain type past Full, a mistyped code. */
    expect_error((const uint8_t *)"\x0a\x08\x0a\x02" "cn\x12\x02\x08\x04", 10, 8,
                 "unknown domain type 4 (0 plain, 1 regex, 2 domain, 3 full)");
    expect_error((const uint8_t *)"\x0a\x02\x08\x01", 4, 2, "site code (field 1) has wire type 0, not 2");
    /* A domain with too many attributes. */
    struct buf s = {.n = 0}, big = {.n = 0};
    put_str(&s, 1, "CN");
    put_domain(&s, 2, "a.cn", "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q");
    put_len(&big, 1, s.b, s.n);
    struct rules_geosite_error err;
    assert_int_equal(rules_geosite_read(big.b, big.n, &w, 1, NULL, NULL, NULL, &err),
                     RULES_GEOSITE_ERR_FORMAT);
    assert_string_equal(err.msg, "a domain with more than 16 attributes");
}

static void
test_want_parse(void **state)
{
    (void)state;
    struct rules_geosite_want w;
    char msg[160];
    want(&w, "geolocation-!cn");
    assert_int_equal(w.nattrs, 0);
    want(&w, "google@ads@cn");
    assert_int_equal(w.code.len, 6);
    assert_int_equal(w.nattrs, 2);
    assert_memory_equal(w.attrs[1].ptr, "cn", 2);
    const char *bad[] = {"", "@ads", "cn@", "c n", "a@b@c@d@e@f", "cn@a b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(rules_geosite_want_parse(mem_slice(bad[i], strlen(bad[i])), &w, msg,
                                                  sizeof(msg)),
                         -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wanted_only),
        cmocka_unit_test(test_attributes),
        cmocka_unit_test(test_unknown_fields_and_missing),
        cmocka_unit_test(test_empty_value_and_stop),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_want_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
