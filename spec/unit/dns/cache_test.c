#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dns/cache.h"
#include "dns/msg.h"

static struct dns_msg q, m; /* large: not on cmocka's stack */

static uint32_t
get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void
make_query(const char *name, uint16_t type)
{
    uint8_t buf[512];
    int n = dns_build_query(buf, sizeof(buf), 0x1111, name, type, 0);
    assert_true(n > 0);
    assert_int_equal(dns_msg_parse(&q, buf, (size_t)n), 0);
}

/* An A answer for |name| with one address 10.0.0.|last| and |ttl|. */
static size_t
answer(uint8_t *out, const char *name, uint8_t last, uint32_t ttl)
{
    uint8_t ip[4] = {10, 0, 0, last};
    make_query(name, DNS_TYPE_A);
    int n = dns_build_addrs(out, 512, &q, ip, 1, ttl);
    assert_true(n > 0);
    return (size_t)n;
}

static size_t
negative(uint8_t *out, const char *name, uint16_t type, int rcode, uint32_t soa_ttl)
{
    make_query(name, type);
    int n = dns_build_error(out, 512, &q, rcode, soa_ttl);
    assert_true(n > 0);
    return (size_t)n;
}

/* The served answer's address byte and first record TTL, checking its ID. */
static int
served(struct dns_cache *c, const char *name, uint16_t type, double now, uint32_t *ttl)
{
    uint8_t out[512];
    int n = dns_cache_get(c, name, type, now, 0x4242, out, sizeof(out));
    if (n <= 0)
        return n;
    assert_int_equal(dns_msg_parse(&m, out, (size_t)n), 0);
    assert_int_equal(m.id, 0x4242);
    if (ttl != NULL)
        *ttl = m.nrr > 0 ? m.rr[0].ttl : 0;
    return m.nan > 0 ? m.rr[0].rdata[3] : 256;
}

static void
test_hit_miss(void **state)
{
    struct dns_cache *c = dns_cache_new(16, 0, 0, 60);
    uint8_t buf[512];
    uint32_t ttl;
    size_t n = answer(buf, "a.test", 7, 300);

    assert_int_equal(served(c, "a.test", DNS_TYPE_A, 100, NULL), 0);
    dns_cache_put(c, "a.test", DNS_TYPE_A, buf, n, 100);
    assert_int_equal(served(c, "a.test", DNS_TYPE_A, 100, &ttl), 7);
    assert_int_equal(ttl, 300);
    assert_int_equal(served(c, "A.Test.", DNS_TYPE_A, 100, NULL), 7); /* case, final dot */
    assert_int_equal(served(c, "a.test", DNS_TYPE_AAAA, 100, NULL), 0);
    assert_int_equal(served(c, "b.test", DNS_TYPE_A, 100, NULL), 0);
    assert_int_equal(served(c, "x.a.test", DNS_TYPE_A, 100, NULL), 0);

    /* Too small a buffer; peek gives the stored bytes as they came. */
    uint8_t tiny[8];
    assert_int_equal(dns_cache_get(c, "a.test", DNS_TYPE_A, 100, 1, tiny, sizeof(tiny)), -1);
    size_t len = 0;
    const uint8_t *p = dns_cache_peek(c, "a.test", DNS_TYPE_A, 150, &len);
    assert_non_null(p);
    assert_int_equal(len, n);
    assert_memory_equal(p, buf, n);
    assert_null(dns_cache_peek(c, "a.test", DNS_TYPE_MX, 150, &len));

    struct dns_cache_stats st;
    dns_cache_stats(c, &st);
    assert_int_equal(st.hits, 4);
    assert_int_equal(st.misses, 5);
    assert_int_equal(st.inserts, 1);
    assert_int_equal(st.entries, 1);
    assert_true(st.bytes > n && st.bytes < n + 200);
    dns_cache_free(c);
}

static void
test_ttl_aging_and_expiry(void **state)
{
    struct dns_cache *c = dns_cache_new(16, 0, 0, 60);
    uint8_t buf[512];
    uint32_t ttl;
    size_t n = answer(buf, "a.test", 1, 10);

    dns_cache_put(c, "a.test", DNS_TYPE_A, buf, n, 1000.0);
    assert_int_equal(served(c, "a.test", DNS_TYPE_A, 1004.2, &ttl), 1);
    assert_int_equal(ttl, 5); /* 4 whole seconds gone, under 6 left */
    assert_int_equal(served(c, "a.test", DNS_TYPE_A, 1009.9, &ttl), 1);
    assert_int_equal(ttl, 0);
    assert_int_equal(served(c, "a.test", DNS_TYPE_A, 1010.0, NULL), 0);
    struct dns_cache_stats st;
    dns_cache_stats(c, &st);
    assert_int_equal(st.expired, 1);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.bytes, 0);
    dns_cache_free(c);
}

static void
test_min_max_clamp(void **state)
{
    struct dns_cache *c = dns_cache_new(16, 5, 60, 30);
    uint8_t buf[512];
    uint32_t ttl;
    size_t n = answer(buf, "zero.test", 1, 0);

    /* A zero TTL is kept min_ttl seconds, served as 0. */
    dns_cache_put(c, "zero.test", DNS_TYPE_A, buf, n, 0);
    assert_int_equal(served(c, "zero.test", DNS_TYPE_A, 4.5, &ttl), 1);
    assert_int_equal(ttl, 0);
    assert_int_equal(served(c, "zero.test", DNS_TYPE_A, 5, NULL), 0);

    /* A day is kept max_ttl seconds, and no served TTL says longer. */
    n = answer(buf, "day.test", 2, 86400);
    dns_cache_put(c, "day.test", DNS_TYPE_A, buf, n, 0);
    assert_int_equal(served(c, "day.test", DNS_TYPE_A, 0, &ttl), 2);
    assert_int_equal(ttl, 60);
    assert_int_equal(served(c, "day.test", DNS_TYPE_A, 30, &ttl), 2);
    assert_int_equal(ttl, 30);
    assert_int_equal(served(c, "day.test", DNS_TYPE_A, 60, NULL), 0);
    dns_cache_free(c);

    /* With min_ttl 0 a zero-TTL answer is not kept at all. */
    c = dns_cache_new(16, 0, 0, 30);
    n = answer(buf, "zero.test", 1, 0);
    dns_cache_put(c, "zero.test", DNS_TYPE_A, buf, n, 0);
    assert_int_equal(served(c, "zero.test", DNS_TYPE_A, 0, NULL), 0);
    dns_cache_free(c);
}

static void
test_lru_eviction(void **state)
{
    struct dns_cache *c = dns_cache_new(3, 0, 0, 60);
    uint8_t buf[512];
    const char *names[] = {"a.test", "b.test", "c.test", "d.test"};
    for (int i = 0; i < 3; i++)
        dns_cache_put(c, names[i], DNS_TYPE_A, buf, answer(buf, names[i], (uint8_t)(i + 1), 300),
                      0);
    assert_int_equal(served(c, "a.test", DNS_TYPE_A, 1, NULL), 1); /* a is now most recent */
    dns_cache_put(c, "d.test", DNS_TYPE_A, buf, answer(buf, "d.test", 4, 300), 1);
    assert_int_equal(served(c, "b.test", DNS_TYPE_A, 2, NULL), 0); /* b went */
    assert_int_equal(served(c, "c.test", DNS_TYPE_A, 2, NULL), 3);
    assert_int_equal(served(c, "d.test", DNS_TYPE_A, 2, NULL), 4);
    assert_int_equal(served(c, "a.test", DNS_TYPE_A, 2, NULL), 1);
    dns_cache_put(c, "b.test", DNS_TYPE_A, buf, answer(buf, "b.test", 2, 300), 3);
    assert_null(dns_cache_peek(c, "c.test", DNS_TYPE_A, 3, &(size_t){0})); /* c was least recent */
    struct dns_cache_stats st;
    dns_cache_stats(c, &st);
    assert_int_equal(st.evictions, 2);
    assert_int_equal(st.entries, 3);
    dns_cache_free(c);
}

static void
test_negative(void **state)
{
    struct dns_cache *c = dns_cache_new(16, 0, 3600, 120);
    uint8_t buf[512];
    uint32_t ttl;
    size_t n;

    /* NXDOMAIN with an SOA: kept for the SOA's negative TTL. */
    n = negative(buf, "nx.test", DNS_TYPE_A, DNS_RCODE_NXDOMAIN, 30);
    dns_cache_put(c, "nx.test", DNS_TYPE_A, buf, n, 0);
    assert_int_equal(served(c, "nx.test", DNS_TYPE_A, 10, &ttl), 256);
    assert_int_equal(DNS_RCODE(m.flags), DNS_RCODE_NXDOMAIN);
    assert_int_equal(ttl, 20); /* the SOA's TTL, aged */
    assert_int_equal(served(c, "nx.test", DNS_TYPE_A, 30, NULL), 0);

    /* Without an SOA: neg_ttl. NODATA likewise. */
    n = negative(buf, "bare.test", DNS_TYPE_A, DNS_RCODE_NXDOMAIN, 0);
    dns_cache_put(c, "bare.test", DNS_TYPE_A, buf, n, 0);
    assert_int_equal(served(c, "bare.test", DNS_TYPE_A, 119, NULL), 256);
    assert_int_equal(served(c, "bare.test", DNS_TYPE_A, 120, NULL), 0);
    n = negative(buf, "v4only.test", DNS_TYPE_AAAA, DNS_RCODE_NOERROR, 0);
    dns_cache_put(c, "v4only.test", DNS_TYPE_AAAA, buf, n, 0);
    assert_int_equal(served(c, "v4only.test", DNS_TYPE_AAAA, 100, NULL), 256);
    assert_int_equal(DNS_RCODE(m.flags), DNS_RCODE_NOERROR);

    /* Not cached: SERVFAIL, REFUSED, truncated, a query, another question. */
    n = negative(buf, "sf.test", DNS_TYPE_A, DNS_RCODE_SERVFAIL, 0);
    dns_cache_put(c, "sf.test", DNS_TYPE_A, buf, n, 0);
    n = negative(buf, "ref.test", DNS_TYPE_A, DNS_RCODE_REFUSED, 0);
    dns_cache_put(c, "ref.test", DNS_TYPE_A, buf, n, 0);
    n = answer(buf, "tc.test", 1, 300);
    buf[2] |= DNS_FLAG_TC >> 8;
    dns_cache_put(c, "tc.test", DNS_TYPE_A, buf, n, 0);
    n = answer(buf, "q.test", 1, 300);
    buf[2] &= (uint8_t)~(DNS_FLAG_QR >> 8);
    dns_cache_put(c, "q.test", DNS_TYPE_A, buf, n, 0);
    n = answer(buf, "other.test", 1, 300);
    dns_cache_put(c, "mismatch.test", DNS_TYPE_A, buf, n, 0);
    dns_cache_put(c, "other.test", DNS_TYPE_AAAA, buf, n, 0);
    dns_cache_put(c, "other.test", DNS_TYPE_A, buf, 20, 0); /* does not parse */
    struct dns_cache_stats st;
    dns_cache_stats(c, &st);
    assert_int_equal(st.entries, 1); /* the two others expired on the way */
    assert_int_equal(st.inserts, 3);
    dns_cache_free(c);
}

static void
test_replace_and_clear(void **state)
{
    struct dns_cache *c = dns_cache_new(16, 0, 0, 60);
    uint8_t buf[512];
    uint32_t ttl;

    dns_cache_put(c, "r.test", DNS_TYPE_A, buf, answer(buf, "r.test", 1, 300), 0);
    dns_cache_put(c, "r.test", DNS_TYPE_A, buf, answer(buf, "r.test", 2, 50), 100);
    assert_int_equal(served(c, "r.test", DNS_TYPE_A, 110, &ttl), 2);
    assert_int_equal(ttl, 40);
    assert_int_equal(served(c, "r.test", DNS_TYPE_A, 150, NULL), 0); /* the new TTL rules */
    dns_cache_put(c, "r.test", DNS_TYPE_A, buf, answer(buf, "r.test", 3, 300), 200);
    dns_cache_put(c, "s.test", DNS_TYPE_A, buf, answer(buf, "s.test", 4, 300), 200);
    struct dns_cache_stats st;
    dns_cache_stats(c, &st);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.inserts, 4);
    assert_int_equal(st.evictions, 0);

    dns_cache_clear(c);
    dns_cache_stats(c, &st);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(served(c, "r.test", DNS_TYPE_A, 200, NULL), 0);
    assert_int_equal(served(c, "s.test", DNS_TYPE_A, 200, NULL), 0);
    dns_cache_put(c, "s.test", DNS_TYPE_A, buf, answer(buf, "s.test", 5, 300), 200);
    assert_int_equal(served(c, "s.test", DNS_TYPE_A, 200, NULL), 5);
    dns_cache_free(c);
}

/* Every record of a multi-record answer is aged, the OPT record is not. */
static void
test_ages_every_record(void **state)
{
    struct dns_cache *c = dns_cache_new(16, 0, 0, 60);
    uint8_t buf[512], out[512];
    static const uint8_t ips[] = {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
    uint8_t qb[64];
    int qn = dns_build_query(qb, sizeof(qb), 9, "multi.test", DNS_TYPE_A, 1232);
    assert_int_equal(dns_msg_parse(&q, qb, (size_t)qn), 0);
    int n = dns_build_addrs(buf, sizeof(buf), &q, ips, 3, 100);
    dns_cache_put(c, "multi.test", DNS_TYPE_A, buf, (size_t)n, 0);
    assert_int_equal(dns_cache_get(c, "multi.test", DNS_TYPE_A, 25, 7, out, sizeof(out)), n);
    assert_int_equal(dns_msg_parse(&m, out, (size_t)n), 0);
    assert_int_equal(m.nrr, 4);
    for (int i = 0; i < 3; i++)
        assert_int_equal(get32(out + m.rr[i].ttl_off), 75);
    assert_int_equal(m.rr[3].type, DNS_TYPE_OPT);
    assert_memory_equal(out + m.rr[3].ttl_off, buf + m.rr[3].ttl_off, 4);
    dns_cache_free(c);
}

static void
test_many_and_disabled(void **state)
{
    struct dns_cache *c = dns_cache_new(1000, 0, 0, 60);
    uint8_t buf[512];
    char name[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "h%d.test", i);
        dns_cache_put(c, name, DNS_TYPE_A, buf, answer(buf, name, (uint8_t)(i % 250 + 1), 300), 0);
    }
    for (int i = 4000; i < 5000; i++) {
        snprintf(name, sizeof(name), "h%d.test", i);
        assert_int_equal(served(c, name, DNS_TYPE_A, 1, NULL), i % 250 + 1);
    }
    assert_int_equal(served(c, "h0.test", DNS_TYPE_A, 1, NULL), 0);
    struct dns_cache_stats st;
    dns_cache_stats(c, &st);
    assert_int_equal(st.entries, 1000);
    assert_int_equal(st.evictions, 4000);
    dns_cache_free(c);

    c = dns_cache_new(0, 0, 0, 60);
    assert_non_null(c);
    dns_cache_put(c, "a.test", DNS_TYPE_A, buf, answer(buf, "a.test", 1, 300), 0);
    assert_int_equal(served(c, "a.test", DNS_TYPE_A, 0, NULL), 0);
    dns_cache_free(c);
    dns_cache_free(NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hit_miss),
        cmocka_unit_test(test_ttl_aging_and_expiry),
        cmocka_unit_test(test_min_max_clamp),
        cmocka_unit_test(test_lru_eviction),
        cmocka_unit_test(test_negative),
        cmocka_unit_test(test_replace_and_clear),
        cmocka_unit_test(test_ages_every_record),
        cmocka_unit_test(test_many_and_disabled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
