#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dns/msg.h"

static struct dns_msg m; /* 19 KB: keep it off the cmocka stack */

static uint32_t
ttl_at(const uint8_t *p, size_t off)
{
    return (uint32_t)p[off] << 24 | (uint32_t)p[off + 1] << 16 | (uint32_t)p[off + 2] << 8 |
           p[off + 3];
}

/* WWW.Example.com A: CNAME to cdn.example.com, which CNAMEs to
 * edge.cdn.example.com with two A records; every name after the question
 * is compressed, the last ones through two pointer hops. OPT 4096. */
static const uint8_t chain[] = {
    0x12, 0x34, 0x81, 0x80, 0, 1, 0, 4, 0, 0, 0, 1,
    /* 12: question */
    3, 'W', 'W', 'W', 7, 'E', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1,
    /* 33: www CNAME cdn.example.com (rdata at 45: "cdn" + pointer to 16) */
    0xc0, 0x0c, 0, 5, 0, 1, 0, 0, 0x0e, 0x10, 0, 6, 3, 'c', 'd', 'n', 0xc0, 0x10,
    /* 51: cdn CNAME edge.cdn.example.com (rdata at 63) */
    0xc0, 0x2d, 0, 5, 0, 1, 0, 0, 0x01, 0x2c, 0, 7, 4, 'e', 'd', 'g', 'e', 0xc0, 0x2d,
    /* 70, 86: edge A 93.184.216.34 TTL 60, A 93.184.216.35 TTL 120 */
    0xc0, 0x3f, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 93, 184, 216, 34,
    0xc0, 0x3f, 0, 1, 0, 1, 0, 0, 0, 120, 0, 4, 93, 184, 216, 35,
    /* 102: OPT, UDP 4096 */
    0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0};

static void
test_response_with_cname_chain(void **state)
{
    char name[DNS_NAME_MAX + 1];
    assert_int_equal(dns_msg_parse(&m, chain, sizeof(chain)), 0);
    assert_int_equal(m.id, 0x1234);
    assert_int_equal(m.flags, 0x8180);
    assert_string_equal(m.qname, "www.example.com");
    assert_int_equal(m.qtype, DNS_TYPE_A);
    assert_int_equal(m.qclass, DNS_CLASS_IN);
    assert_int_equal(m.question_end, 33);
    assert_int_equal(m.nrr, 5);
    assert_int_equal(m.nan, 4);
    assert_int_equal(m.nns, 0);
    assert_true(m.has_edns);
    assert_int_equal(m.edns_udp_size, 4096);

    assert_string_equal(m.rr[0].name, "www.example.com");
    assert_int_equal(m.rr[0].type, DNS_TYPE_CNAME);
    assert_int_equal(m.rr[0].ttl, 3600);
    assert_int_equal(m.rr[0].ttl_off, 39);
    assert_int_equal(m.rr[0].rdata_off, 45);
    assert_ptr_equal(m.rr[0].rdata, chain + 45);
    size_t off = m.rr[0].rdata_off;
    assert_int_equal(dns_name_read(chain, sizeof(chain), &off, name, sizeof(name)), 0);
    assert_string_equal(name, "cdn.example.com");
    assert_int_equal(off, 51);

    assert_string_equal(m.rr[1].name, "cdn.example.com");
    off = m.rr[1].rdata_off;
    assert_int_equal(dns_name_read(chain, sizeof(chain), &off, name, sizeof(name)), 0);
    assert_string_equal(name, "edge.cdn.example.com");
    assert_string_equal(m.rr[2].name, "edge.cdn.example.com");
    assert_int_equal(m.rr[2].rdlen, 4);
    assert_memory_equal(m.rr[2].rdata, "\x5d\xb8\xd8\x22", 4);
    assert_int_equal(m.rr[3].ttl, 120);
    assert_int_equal(m.rr[4].type, DNS_TYPE_OPT);
    assert_string_equal(m.rr[4].name, "");

    /* Every shorter prefix is malformed. */
    for (size_t n = 0; n < sizeof(chain); n++)
        assert_int_equal(dns_msg_parse(&m, chain, n), -1);
}

static void
test_bad_pointers(void **state)
{
    static const uint8_t self[] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1};
    static const uint8_t fwd[] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0,
                                  0xc0, 0x0e, 1, 'a', 0, 0, 1, 0, 1};
    static const uint8_t loop[] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0,
                                   1, 'a', 0xc0, 0x0c, 0, 1, 0, 1};
    static const uint8_t header[] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x02, 0, 1, 0, 1};
    static const uint8_t cut[] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 'a', 0xc0};
    static const uint8_t ext[] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x41, 0, 0, 1, 0, 1};
    /* A loop between two answer owners: the second points back at the
     * first, which points forward at the second. */
    static const uint8_t pair[] = {0, 1, 0x81, 0, 0, 0, 0, 2, 0, 0, 0, 0,
                                   1, 'a', 0xc0, 0x1e, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4,
                                   1, 'b', 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4};
    char name[DNS_NAME_MAX + 1];
    size_t off;

    assert_int_equal(dns_msg_parse(&m, self, sizeof(self)), -1);
    assert_int_equal(dns_msg_parse(&m, fwd, sizeof(fwd)), -1);
    assert_int_equal(dns_msg_parse(&m, loop, sizeof(loop)), -1);
    assert_int_equal(dns_msg_parse(&m, header, sizeof(header)), -1);
    assert_int_equal(dns_msg_parse(&m, cut, sizeof(cut)), -1);
    assert_int_equal(dns_msg_parse(&m, ext, sizeof(ext)), -1);
    assert_int_equal(dns_msg_parse(&m, pair, sizeof(pair)), -1);
    off = 30;
    assert_int_equal(dns_name_read(pair, sizeof(pair), &off, name, sizeof(name)), -1);
    off = 12;
    assert_int_equal(dns_name_read(pair, sizeof(pair), &off, name, sizeof(name)), -1);
    /* A pointer to bytes no name spelled out (here a TTL of 0, which reads
     * as the root): aging would change what such a name says. */
    static const uint8_t ttl[] = {0, 1, 0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0,
                                  1, 'a', 0, 0, 1, 0, 1,
                                  0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 1, 2, 3, 4,
                                  0xc0, 0x19, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 1, 2, 3, 4};
    assert_int_equal(dns_msg_parse(&m, ttl, sizeof(ttl)), -1);
    off = 35;
    assert_int_equal(dns_name_read(ttl, sizeof(ttl), &off, name, sizeof(name)), 0);
    assert_string_equal(name, "");
    /* A long backward chain of pointers is cut by the hop bound. */
    uint8_t hops[12 + 2 * 100 + 1] = {0};
    hops[12] = 0;
    for (size_t i = 1; i <= 100; i++) {
        hops[12 + 2 * i - 1] = 0xc0;
        hops[12 + 2 * i] = (uint8_t)(12 + 2 * (i - 1) - (i > 1));
    }
    off = 12 + 2 * 100 - 1;
    assert_int_equal(dns_name_read(hops, sizeof(hops), &off, name, sizeof(name)), -1);
    off = 12 + 2 * 3 - 1;
    assert_int_equal(dns_name_read(hops, sizeof(hops), &off, name, sizeof(name)), 0);
    assert_string_equal(name, "");
    assert_int_equal(off, 12 + 2 * 3 + 1);
}

/* A query for |nlabels| labels of |each| bytes ('a'), type A. */
static size_t
long_query(uint8_t *buf, size_t nlabels, size_t each, size_t last)
{
    static const uint8_t head[] = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    size_t off = sizeof(head);
    memcpy(buf, head, sizeof(head));
    for (size_t i = 0; i < nlabels; i++) {
        size_t n = i + 1 == nlabels ? last : each;
        buf[off++] = (uint8_t)n;
        memset(buf + off, 'a', n);
        off += n;
    }
    buf[off++] = 0;
    memcpy(buf + off, "\0\1\0\1", 4);
    return off + 4;
}

static void
test_label_and_name_limits(void **state)
{
    uint8_t buf[600];
    size_t n = long_query(buf, 1, 63, 63);
    assert_int_equal(dns_msg_parse(&m, buf, n), 0);
    assert_int_equal(strlen(m.qname), 63);
    n = long_query(buf, 1, 64, 64); /* 0x40: not a length */
    assert_int_equal(dns_msg_parse(&m, buf, n), -1);
    n = long_query(buf, 4, 63, 61); /* 255 wire bytes: the longest */
    assert_int_equal(dns_msg_parse(&m, buf, n), 0);
    assert_int_equal(strlen(m.qname), 253);
    n = long_query(buf, 4, 63, 62); /* 256 */
    assert_int_equal(dns_msg_parse(&m, buf, n), -1);
    n = long_query(buf, 128, 1, 1); /* 257 in one-byte labels */
    assert_int_equal(dns_msg_parse(&m, buf, n), -1);

    /* Too small an output buffer fails instead of truncating. */
    char small[8];
    size_t off = 12;
    n = long_query(buf, 1, 8, 8);
    assert_int_equal(dns_name_read(buf, n, &off, small, sizeof(small)), -1);
}

static void
test_truncated_records(void **state)
{
    /* A with rdlength 4 but three bytes left; A with rdlength 5. */
    static const uint8_t shortrd[] = {0, 1, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0,
                                      1, 'a', 0, 0, 1, 0, 1,
                                      0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3};
    static const uint8_t longa[] = {0, 1, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0,
                                    1, 'a', 0, 0, 1, 0, 1,
                                    0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 1, 0, 5, 1, 2, 3, 4, 5};
    /* CNAME whose target runs past its rdata. */
    static const uint8_t cname[] = {0, 1, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0,
                                    1, 'a', 0, 0, 1, 0, 1,
                                    0xc0, 0x0c, 0, 5, 0, 1, 0, 0, 0, 1, 0, 2, 1, 'b', 0};
    /* ancount says 2, one record present. */
    static const uint8_t missing[] = {0, 1, 0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0,
                                      1, 'a', 0, 0, 1, 0, 1,
                                      0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4};
    /* Question without its type and class. */
    static const uint8_t noq[] = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 'a', 0, 0, 1};
    assert_int_equal(dns_msg_parse(&m, shortrd, sizeof(shortrd)), -1);
    assert_int_equal(dns_msg_parse(&m, longa, sizeof(longa)), -1);
    assert_int_equal(dns_msg_parse(&m, cname, sizeof(cname)), -1);
    assert_int_equal(dns_msg_parse(&m, missing, sizeof(missing)), -1);
    assert_int_equal(dns_msg_parse(&m, noq, sizeof(noq)), -1);
    assert_int_equal(dns_msg_parse(&m, noq, 11), -1);
}

static void
test_no_question(void **state)
{
    static const uint8_t hdr[] = {0xab, 0xcd, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0};
    memset(&m, 0x55, sizeof(m));
    assert_int_equal(dns_msg_parse(&m, hdr, sizeof(hdr)), 0);
    assert_int_equal(m.id, 0xabcd);
    assert_int_equal(m.qdcount, 0);
    assert_string_equal(m.qname, "");
    assert_int_equal(m.qtype, 0);
    assert_int_equal(m.question_end, 12);
    assert_int_equal(m.nrr, 0);
    assert_false(m.has_edns);
}

static void
test_edns_and_unknown_types(void **state)
{
    /* Query with OPT (UDP 1400, DO bit). */
    static const uint8_t q[] = {0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1,
                                1, 'x', 0, 0, 28, 0, 1,
                                0, 0, 41, 0x05, 0x78, 0x80, 0, 0x80, 0, 0, 0};
    /* OPT asking for less than 512. */
    static const uint8_t tiny[] = {0, 7, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1,
                                   0, 0, 41, 0x00, 0x10, 0, 0, 0, 0, 0, 0};
    /* Two OPT records; an OPT in the answer section; an OPT not at root. */
    static const uint8_t two[] = {0, 7, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2,
                                  0, 0, 41, 2, 0, 0, 0, 0, 0, 0, 0,
                                  0, 0, 41, 2, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t inan[] = {0, 7, 0x81, 0, 0, 0, 0, 1, 0, 0, 0, 0,
                                   0, 0, 41, 2, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t named[] = {0, 7, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1,
                                    1, 'a', 0, 0, 41, 2, 0, 0, 0, 0, 0, 0, 0};
    /* HTTPS (65) and type 99 answers, kept as opaque records. */
    static const uint8_t unk[] = {0, 9, 0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0,
                                  1, 'h', 0, 0, 65, 0, 1,
                                  0xc0, 0x0c, 0, 65, 0, 1, 0, 0, 1, 0, 0, 7,
                                  0, 1, 0, 0, 1, 0, 0,
                                  0xc0, 0x0c, 0, 99, 0, 1, 0, 0, 2, 0, 0, 3, 2, 'h', 'i'};

    assert_int_equal(dns_msg_parse(&m, q, sizeof(q)), 0);
    assert_true(m.has_edns);
    assert_int_equal(m.edns_udp_size, 1400);
    assert_int_equal(m.qtype, DNS_TYPE_AAAA);
    assert_int_equal(m.nrr, 1);
    assert_int_equal(m.rr[0].ttl, 0x80008000); /* OPT's TTL is flags: not clamped */
    assert_int_equal(dns_msg_parse(&m, tiny, sizeof(tiny)), 0);
    assert_int_equal(m.edns_udp_size, 512);
    assert_int_equal(dns_msg_parse(&m, two, sizeof(two)), -1);
    assert_int_equal(dns_msg_parse(&m, inan, sizeof(inan)), -1);
    assert_int_equal(dns_msg_parse(&m, named, sizeof(named)), -1);

    assert_int_equal(dns_msg_parse(&m, unk, sizeof(unk)), 0);
    assert_int_equal(m.nrr, 2);
    assert_int_equal(m.rr[0].type, 65);
    assert_int_equal(m.rr[0].rdlen, 7);
    assert_int_equal(m.rr[0].ttl, 256);
    assert_int_equal(m.rr[1].type, 99);
    assert_memory_equal(m.rr[1].rdata, "\2hi", 3);
    assert_false(m.has_edns);
}

static void
test_name_write(void **state)
{
    uint8_t out[300];
    char back[DNS_NAME_MAX + 1];
    size_t off;

    assert_int_equal(dns_name_write(out, sizeof(out), "a.bc"), 6);
    assert_memory_equal(out, "\1a\2bc\0", 6);
    assert_int_equal(dns_name_write(out, sizeof(out), "a.bc."), 6);
    assert_int_equal(dns_name_write(out, sizeof(out), ""), 1);
    assert_int_equal(dns_name_write(out, sizeof(out), "."), 1);
    assert_int_equal(out[0], 0);
    assert_int_equal(dns_name_write(out, sizeof(out), "a..b"), -1);
    assert_int_equal(dns_name_write(out, sizeof(out), ".a"), -1);
    assert_int_equal(dns_name_write(out, sizeof(out), "a.b.."), -1);
    assert_int_equal(dns_name_write(out, 5, "a.bc"), -1);
    assert_int_equal(dns_name_write(out, 6, "a.bc"), 6);

    char label[70];
    memset(label, 'x', 64);
    label[64] = '\0';
    assert_int_equal(dns_name_write(out, sizeof(out), label), -1);
    label[63] = '\0';
    assert_int_equal(dns_name_write(out, sizeof(out), label), 65);

    /* 253 characters is the longest name, 254 too long. */
    char name[300];
    memset(name, 'a', 253);
    for (int i = 63; i < 253; i += 64)
        name[i] = '.';
    name[253] = '\0';
    assert_int_equal(dns_name_write(out, sizeof(out), name), 255);
    name[253] = 'a';
    name[254] = '\0';
    assert_int_equal(dns_name_write(out, sizeof(out), name), -1);

    /* Escapes round-trip through the parser's presentation form. */
    static const uint8_t odd[] = {3, 'a', '.', 'b', 2, '\\', ' ', 1, 0xff, 0};
    uint8_t msg[64] = {0};
    memcpy(msg + 12, odd, sizeof(odd));
    off = 12;
    assert_int_equal(dns_name_read(msg, 12 + sizeof(odd), &off, back, sizeof(back)), 0);
    assert_string_equal(back, "a\\.b.\\\\\\032.\\255");
    assert_int_equal(dns_name_write(out, sizeof(out), back), sizeof(odd));
    assert_memory_equal(out, odd, sizeof(odd));
    assert_int_equal(dns_name_write(out, sizeof(out), "a\\256"), -1);
    assert_int_equal(dns_name_write(out, sizeof(out), "a\\"), -1);
}

/* A parsed query for |name| / |type|, with EDNS when |edns|. */
static void
query(struct dns_msg *q, const char *name, uint16_t type, int edns)
{
    uint8_t buf[512];
    int n = dns_build_query(buf, sizeof(buf), 0xbeef, name, type, edns ? 1400 : 0);
    assert_true(n > 0);
    assert_int_equal(dns_msg_parse(q, buf, (size_t)n), 0);
}

static struct dns_msg q;

static void
test_build_query(void **state)
{
    uint8_t buf[512];
    int n = dns_build_query(buf, sizeof(buf), 0x4242, "Host.Example", DNS_TYPE_HTTPS, 1232);
    assert_int_equal(n, 12 + 14 + 4 + 11);
    assert_int_equal(dns_msg_parse(&m, buf, (size_t)n), 0);
    assert_int_equal(m.id, 0x4242);
    assert_int_equal(m.flags, DNS_FLAG_RD);
    assert_string_equal(m.qname, "host.example");
    assert_int_equal(m.qtype, DNS_TYPE_HTTPS);
    assert_true(m.has_edns);
    assert_int_equal(m.edns_udp_size, 1232);
    n = dns_build_query(buf, sizeof(buf), 1, "a", DNS_TYPE_A, 0);
    assert_int_equal(n, 12 + 3 + 4);
    assert_int_equal(buf[11], 0);
    for (size_t cap = 0; cap < 12 + 3 + 4; cap++)
        assert_int_equal(dns_build_query(buf, cap, 1, "a", DNS_TYPE_A, 0), -1);
    assert_int_equal(dns_build_query(buf, sizeof(buf), 1, "a..b", DNS_TYPE_A, 0), -1);
}

static void
test_build_addrs(void **state)
{
    uint8_t out[512];
    static const uint8_t v4[] = {198, 18, 0, 1, 198, 18, 0, 2};
    static const uint8_t v6[16] = {0xfc, 0, [15] = 1};

    query(&q, "fake.test", DNS_TYPE_A, 0);
    int n = dns_build_addrs(out, sizeof(out), &q, v4, 2, 1);
    assert_int_equal(n, 12 + 11 + 4 + 2 * 16);
    assert_int_equal(dns_msg_parse(&m, out, (size_t)n), 0);
    assert_int_equal(m.id, 0xbeef);
    assert_int_equal(m.flags, DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA);
    assert_string_equal(m.qname, "fake.test");
    assert_int_equal(m.qtype, DNS_TYPE_A);
    assert_int_equal(m.nan, 2);
    assert_false(m.has_edns);
    assert_int_equal(out[27], 0xc0); /* owner: pointer to the question */
    assert_int_equal(out[28], 0x0c);
    assert_string_equal(m.rr[1].name, "fake.test");
    assert_int_equal(m.rr[1].ttl, 1);
    assert_memory_equal(m.rr[1].rdata, v4 + 4, 4);
    for (size_t cap = 0; cap < (size_t)n; cap++)
        assert_int_equal(dns_build_addrs(out, cap, &q, v4, 2, 1), -1);

    query(&q, "fake.test", DNS_TYPE_AAAA, 1);
    n = dns_build_addrs(out, sizeof(out), &q, v6, 1, 300);
    assert_int_equal(dns_msg_parse(&m, out, (size_t)n), 0);
    assert_int_equal(m.nan, 1);
    assert_int_equal(m.rr[0].type, DNS_TYPE_AAAA);
    assert_memory_equal(m.rr[0].rdata, v6, 16);
    assert_true(m.has_edns);
    assert_int_equal(m.edns_udp_size, 1232);
    for (size_t cap = 0; cap < (size_t)n; cap++)
        assert_int_equal(dns_build_addrs(out, cap, &q, v6, 1, 300), -1);

    /* NODATA for any type; addresses only for A/AAAA. */
    query(&q, "fake.test", DNS_TYPE_HTTPS, 0);
    n = dns_build_addrs(out, sizeof(out), &q, NULL, 0, 300);
    assert_int_equal(dns_msg_parse(&m, out, (size_t)n), 0);
    assert_int_equal(DNS_RCODE(m.flags), DNS_RCODE_NOERROR);
    assert_int_equal(m.ancount + m.nscount, 0);
    assert_int_equal(m.qtype, DNS_TYPE_HTTPS);
    assert_int_equal(dns_build_addrs(out, sizeof(out), &q, v4, 1, 300), -1);
}

static void
test_build_error(void **state)
{
    uint8_t out[512];

    query(&q, "gone.test", DNS_TYPE_A, 1);
    int n = dns_build_error(out, sizeof(out), &q, DNS_RCODE_NXDOMAIN, 30);
    assert_true(n > 0);
    assert_int_equal(dns_msg_parse(&m, out, (size_t)n), 0);
    assert_int_equal(DNS_RCODE(m.flags), DNS_RCODE_NXDOMAIN);
    assert_int_equal(m.id, 0xbeef);
    assert_string_equal(m.qname, "gone.test");
    assert_int_equal(m.nan, 0);
    assert_int_equal(m.nns, 1);
    assert_int_equal(m.rr[0].type, DNS_TYPE_SOA);
    assert_string_equal(m.rr[0].name, "gone.test");
    assert_true(m.has_edns);
    assert_int_equal(dns_msg_min_ttl(&m, out, (size_t)n, 999), 30);
    for (size_t cap = 0; cap < (size_t)n; cap++)
        assert_int_equal(dns_build_error(out, cap, &q, DNS_RCODE_NXDOMAIN, 30), -1);

    /* NODATA with SOA; SERVFAIL never gets one; no SOA without a TTL. */
    n = dns_build_error(out, sizeof(out), &q, DNS_RCODE_NOERROR, 5);
    assert_int_equal(dns_msg_parse(&m, out, (size_t)n), 0);
    assert_int_equal(m.nns, 1);
    assert_int_equal(dns_msg_min_ttl(&m, out, (size_t)n, 999), 5);
    n = dns_build_error(out, sizeof(out), &q, DNS_RCODE_SERVFAIL, 5);
    assert_int_equal(dns_msg_parse(&m, out, (size_t)n), 0);
    assert_int_equal(DNS_RCODE(m.flags), DNS_RCODE_SERVFAIL);
    assert_int_equal(m.nns, 0);
    n = dns_build_error(out, sizeof(out), &q, DNS_RCODE_NXDOMAIN, 0);
    assert_int_equal(dns_msg_parse(&m, out, (size_t)n), 0);
    assert_int_equal(m.nns, 0);
    assert_int_equal(dns_msg_min_ttl(&m, out, (size_t)n, 999), 999);
}

static void
test_build_formerr(void **state)
{
    static const uint8_t junk[] = {0x77, 0x88, 0x29, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0};
    uint8_t out[64];
    int n = dns_build_formerr(out, sizeof(out), junk, sizeof(junk));
    assert_int_equal(n, 12);
    assert_int_equal(dns_msg_parse(&m, out, (size_t)n), 0);
    assert_int_equal(m.id, 0x7788);
    assert_int_equal(DNS_RCODE(m.flags), DNS_RCODE_FORMERR);
    assert_int_equal(DNS_OPCODE(m.flags), 5);
    assert_true(m.flags & DNS_FLAG_QR);
    assert_true(m.flags & DNS_FLAG_RD);
    assert_int_equal(m.qdcount, 0);
    assert_int_equal(dns_build_formerr(out, sizeof(out), junk, 11), -1);
    assert_int_equal(dns_build_formerr(out, 11, junk, sizeof(junk)), -1);
}

static void
test_truncate(void **state)
{
    uint8_t buf[sizeof(chain)];
    memcpy(buf, chain, sizeof(chain));
    assert_int_equal(dns_msg_truncate(buf, sizeof(buf), sizeof(buf)), sizeof(buf));
    assert_memory_equal(buf, chain, sizeof(chain));
    size_t n = dns_msg_truncate(buf, sizeof(buf), 40);
    assert_int_equal(n, 33);
    assert_int_equal(dns_msg_parse(&m, buf, n), 0);
    assert_true(m.flags & DNS_FLAG_TC);
    assert_string_equal(m.qname, "www.example.com");
    assert_int_equal(m.qtype, DNS_TYPE_A);
    assert_int_equal(m.ancount + m.nscount + m.arcount, 0);
    assert_int_equal(m.id, 0x1234);

    /* A question that does not fit either goes as well. */
    memcpy(buf, chain, sizeof(chain));
    n = dns_msg_truncate(buf, sizeof(buf), 20);
    assert_int_equal(n, 12);
    assert_int_equal(dns_msg_parse(&m, buf, n), 0);
    assert_int_equal(m.qdcount, 0);
    assert_true(m.flags & DNS_FLAG_TC);
    assert_int_equal(dns_msg_truncate(buf, sizeof(buf), 11), 0);
}

static void
test_min_ttl(void **state)
{
    assert_int_equal(dns_msg_parse(&m, chain, sizeof(chain)), 0);
    assert_int_equal(dns_msg_min_ttl(&m, chain, sizeof(chain), 7), 60);

    /* NXDOMAIN, SOA TTL 900 and MINIMUM 300; then TTL 100. */
    uint8_t nx[] = {0, 1, 0x81, 0x83, 0, 1, 0, 0, 0, 1, 0, 0,
                    1, 'a', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1,
                    /* 24: owner "test" (14), SOA */
                    0xc0, 0x0e, 0, 6, 0, 1, 0, 0, 0x03, 0x84, 0, 27,
                    2, 'n', 's', 0xc0, 0x0e, 0xc0, 0x0e,
                    0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0x01, 0x2c};
    assert_int_equal(dns_msg_parse(&m, nx, sizeof(nx)), 0);
    assert_int_equal(m.nns, 1);
    assert_int_equal(dns_msg_min_ttl(&m, nx, sizeof(nx), 7), 300);
    nx[32] = 0;
    nx[33] = 100;
    assert_int_equal(dns_msg_parse(&m, nx, sizeof(nx)), 0);
    assert_int_equal(dns_msg_min_ttl(&m, nx, sizeof(nx), 7), 100);

    /* Negative without SOA: the default. A TTL with the top bit is 0. */
    static const uint8_t bare[] = {0, 1, 0x81, 0x83, 0, 1, 0, 0, 0, 0, 0, 0,
                                   1, 'a', 0, 0, 1, 0, 1};
    assert_int_equal(dns_msg_parse(&m, bare, sizeof(bare)), 0);
    assert_int_equal(dns_msg_min_ttl(&m, bare, sizeof(bare), 7), 7);
    static const uint8_t top[] = {0, 1, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0,
                                  1, 'a', 0, 0, 1, 0, 1,
                                  0xc0, 0x0c, 0, 1, 0, 1, 0x80, 0, 0, 5, 0, 4, 1, 2, 3, 4};
    assert_int_equal(dns_msg_parse(&m, top, sizeof(top)), 0);
    assert_int_equal(dns_msg_min_ttl(&m, top, sizeof(top), 7), 0);
}

static void
test_age(void **state)
{
    uint8_t buf[sizeof(chain)];
    memcpy(buf, chain, sizeof(chain));
    assert_int_equal(dns_msg_parse(&m, buf, sizeof(buf)), 0);
    dns_msg_age(buf, sizeof(buf), &m, 100, 0x9999);
    assert_int_equal(buf[0], 0x99);
    assert_int_equal(buf[1], 0x99);
    assert_int_equal(ttl_at(buf, 39), 3500);
    assert_int_equal(ttl_at(buf, 57), 200);
    assert_int_equal(ttl_at(buf, 76), 0); /* 60 - 100 stops at 0 */
    assert_int_equal(ttl_at(buf, 92), 20);
    assert_memory_equal(buf + 102, chain + 102, 11); /* OPT untouched */
    /* Ages from the parsed TTLs: doing it again gives the same bytes. */
    dns_msg_age(buf, sizeof(buf), &m, 100, 0x9999);
    assert_int_equal(ttl_at(buf, 39), 3500);
}

/* More records than DNS_MAX_RRS: counted, not kept, and still aged. */
static void
test_many_records(void **state)
{
    static uint8_t buf[19 + 100 * 16];
    static const uint8_t head[] = {0, 1, 0x81, 0x80, 0, 1, 0, 100, 0, 0, 0, 0, 1, 'm', 0, 0, 1, 0, 1};
    memcpy(buf, head, sizeof(head));
    size_t off = sizeof(head);
    for (int i = 0; i < 100; i++) {
        static const uint8_t rr[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0x10, 0, 0, 4, 10, 0, 0};
        memcpy(buf + off, rr, sizeof(rr));
        buf[off + 15] = (uint8_t)i;
        off += 16;
    }
    assert_int_equal(dns_msg_parse(&m, buf, off), 0);
    assert_int_equal(m.nrr, DNS_MAX_RRS);
    assert_int_equal(m.nan, DNS_MAX_RRS);
    assert_int_equal(m.ancount, 100);
    dns_msg_age(buf, off, &m, 0x100, 5);
    for (int i = 0; i < 100; i++)
        assert_int_equal(ttl_at(buf, sizeof(head) + 16 * (size_t)i + 6), 0x0f00);
}

static void
test_type_name(void **state)
{
    char buf[16];
    assert_string_equal(dns_type_name(DNS_TYPE_A, buf, sizeof(buf)), "A");
    assert_string_equal(dns_type_name(DNS_TYPE_AAAA, buf, sizeof(buf)), "AAAA");
    assert_string_equal(dns_type_name(DNS_TYPE_HTTPS, buf, sizeof(buf)), "HTTPS");
    assert_string_equal(dns_type_name(99, buf, sizeof(buf)), "TYPE99");
    assert_string_equal(dns_type_name(65535, buf, sizeof(buf)), "TYPE65535");
}

/* Records as zone-file text (what GET /dns/query shows): compressed names
 * followed, TXT quoted and escaped, unknown or broken data as RFC 3597. */
static void
test_rr_text(void **state)
{
    char t[256];
    assert_int_equal(dns_msg_parse(&m, chain, sizeof(chain)), 0);
    assert_int_equal(dns_rr_text(chain, sizeof(chain), &m.rr[0], t, sizeof(t)), 16);
    assert_string_equal(t, "cdn.example.com.");
    dns_rr_text(chain, sizeof(chain), &m.rr[1], t, sizeof(t));
    assert_string_equal(t, "edge.cdn.example.com.");
    dns_rr_text(chain, sizeof(chain), &m.rr[2], t, sizeof(t));
    assert_string_equal(t, "93.184.216.34");
    assert_int_equal(dns_rr_text(chain, sizeof(chain), &m.rr[2], t, 5), -1);

    static const uint8_t rdata[] = {
        0, 10, 2, 'm', 'x', 0,                          /* MX 10 mx. */
        5, 'a', '"', 'b', '\\', 0x01, 1, 'c',           /* TXT "a\"b\\\001" "c" */
        0, 5, 'i', 's', 's', 'u', 'e', 'c', 'a',        /* CAA 0 issue "ca" */
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, /* AAAA */
        0xde, 0xad,                                     /* TYPE99 */
    };
    struct dns_rr rr = {.type = DNS_TYPE_MX, .rdlen = 6, .rdata = rdata, .rdata_off = 0};
    dns_rr_text(rdata, sizeof(rdata), &rr, t, sizeof(t));
    assert_string_equal(t, "10 mx.");
    rr = (struct dns_rr){.type = DNS_TYPE_TXT, .rdlen = 8, .rdata = rdata + 6, .rdata_off = 6};
    dns_rr_text(rdata, sizeof(rdata), &rr, t, sizeof(t));
    assert_string_equal(t, "\"a\\\"b\\\\\\001\" \"c\"");
    rr = (struct dns_rr){.type = 257, .rdlen = 9, .rdata = rdata + 14, .rdata_off = 14};
    dns_rr_text(rdata, sizeof(rdata), &rr, t, sizeof(t));
    assert_string_equal(t, "0 issue \"ca\"");
    rr = (struct dns_rr){.type = DNS_TYPE_AAAA, .rdlen = 16, .rdata = rdata + 23, .rdata_off = 23};
    dns_rr_text(rdata, sizeof(rdata), &rr, t, sizeof(t));
    assert_string_equal(t, "2001:db8::1");
    rr = (struct dns_rr){.type = 99, .rdlen = 2, .rdata = rdata + 39, .rdata_off = 39};
    dns_rr_text(rdata, sizeof(rdata), &rr, t, sizeof(t));
    assert_string_equal(t, "\\# 2 dead");
    /* A TXT string that claims more than the record holds, an A of 2 bytes. */
    rr = (struct dns_rr){.type = DNS_TYPE_TXT, .rdlen = 3, .rdata = rdata + 6, .rdata_off = 6};
    dns_rr_text(rdata, sizeof(rdata), &rr, t, sizeof(t));
    assert_string_equal(t, "\\# 3 056122");
    rr = (struct dns_rr){.type = DNS_TYPE_A, .rdlen = 2, .rdata = rdata + 39, .rdata_off = 39};
    dns_rr_text(rdata, sizeof(rdata), &rr, t, sizeof(t));
    assert_string_equal(t, "\\# 2 dead");

    assert_int_equal(dns_type_parse("aaaa"), DNS_TYPE_AAAA);
    assert_int_equal(dns_type_parse("HTTPS"), DNS_TYPE_HTTPS);
    assert_int_equal(dns_type_parse("TYPE99"), 99);
    assert_int_equal(dns_type_parse("TYPE70000"), -1);
    assert_int_equal(dns_type_parse("BOGUS"), -1);
    assert_int_equal(dns_type_parse("TYPE"), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_response_with_cname_chain),
        cmocka_unit_test(test_bad_pointers),
        cmocka_unit_test(test_label_and_name_limits),
        cmocka_unit_test(test_truncated_records),
        cmocka_unit_test(test_no_question),
        cmocka_unit_test(test_edns_and_unknown_types),
        cmocka_unit_test(test_name_write),
        cmocka_unit_test(test_build_query),
        cmocka_unit_test(test_build_addrs),
        cmocka_unit_test(test_build_error),
        cmocka_unit_test(test_build_formerr),
        cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_min_ttl),
        cmocka_unit_test(test_age),
        cmocka_unit_test(test_many_records),
        cmocka_unit_test(test_type_name),
        cmocka_unit_test(test_rr_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
