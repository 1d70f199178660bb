#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns/cache.h"
#include "dns/msg.h"
#include "fuzz.h"

static struct dns_msg m, r; /* large: static, like a server would keep them */
static uint8_t out[4096], copy[DNS_MSG_MAX];

/* Any name that reads writes back to the same wire length and reads again
 * to the same text: the presentation form loses nothing but case. The
 * round trip is checked for the first names only, to keep runs fast. */
static void
check_names(const uint8_t *p, size_t n)
{
    char name[DNS_NAME_MAX + 1], again[DNS_NAME_MAX + 1];
    uint8_t wire[DNS_NAME_MAX + 1];
    int budget = 32;

    for (size_t off = 0; off < n; off++) {
        size_t o = off;
        if (dns_name_read(p, n, &o, name, sizeof(name)) < 0)
            continue;
        CHECK(o > off && o <= n && strlen(name) <= DNS_NAME_MAX);
        if (budget-- <= 0)
            continue;
        int w = dns_name_write(wire, sizeof(wire), name);
        CHECK(w > 0 && w <= 255);
        uint8_t msg[12 + 256] = {0};
        memcpy(msg + 12, wire, (size_t)w);
        size_t o2 = 12;
        CHECK(dns_name_read(msg, 12 + (size_t)w, &o2, again, sizeof(again)) == 0);
        CHECK(o2 == 12 + (size_t)w && strcmp(name, again) == 0);
    }
}

/* A builder's output re-parses as an answer to the same question. */
static void
check_reply(int n, size_t cap, int rcode)
{
    if (n < 0) {
        CHECK(cap < sizeof(out)); /* only too small a buffer fails */
        return;
    }
    CHECK((size_t)n <= cap);
    CHECK(dns_msg_parse(&r, out, (size_t)n) == 0);
    CHECK(r.id == m.id && r.qtype == m.qtype && r.qclass == m.qclass);
    CHECK(strcmp(r.qname, m.qname) == 0);
    CHECK((r.flags & DNS_FLAG_QR) && DNS_RCODE(r.flags) == rcode);
    CHECK(r.has_edns == m.has_edns);
}

static void
check_builders(const uint8_t *data, size_t size)
{
    size_t cap = size % 2 ? sizeof(out) : size % sizeof(out);
    size_t naddr = m.qtype == DNS_TYPE_A || m.qtype == DNS_TYPE_AAAA ? size % 5 : 0;
    uint8_t addrs[4 * 16] = {0};
    memcpy(addrs, data, size < sizeof(addrs) ? size : sizeof(addrs));

    check_reply(dns_build_addrs(out, cap, &m, addrs, naddr, m.id), cap, DNS_RCODE_NOERROR);
    int n = dns_build_addrs(out, sizeof(out), &m, addrs, naddr, 60);
    CHECK(n > 0 && dns_msg_parse(&r, out, (size_t)n) == 0 && r.nan == naddr);
    for (size_t i = 0; i < naddr; i++)
        CHECK(memcmp(r.rr[i].rdata, addrs + i * r.rr[i].rdlen, r.rr[i].rdlen) == 0);
    check_reply(dns_build_error(out, cap, &m, DNS_RCODE_NXDOMAIN, size % 3 ? m.id : 0), cap,
                DNS_RCODE_NXDOMAIN);
    check_reply(dns_build_error(out, cap, &m, DNS_RCODE_NOERROR, 30), cap, DNS_RCODE_NOERROR);
    check_reply(dns_build_error(out, cap, &m, DNS_RCODE_REFUSED, 30), cap, DNS_RCODE_REFUSED);

    n = dns_build_query(out, cap, m.id, m.qname, m.qtype, size % 3 ? 1232 : 0);
    CHECK(n > 0 || cap < sizeof(out));
    if (n > 0) {
        CHECK(dns_msg_parse(&r, out, (size_t)n) == 0);
        CHECK(r.id == m.id && r.qtype == m.qtype && strcmp(r.qname, m.qname) == 0);
    }
}

/* Aging, truncating and the TTL rule on a copy of the input. */
static void
check_rewrites(const uint8_t *data, size_t size)
{
    uint32_t elapsed = size > 4 ? (uint32_t)data[size - 1] << 8 | data[size - 2] : 0;

    memcpy(copy, data, size);
    dns_msg_age(copy, size, &m, elapsed, 0xabcd);
    CHECK(dns_msg_parse(&r, copy, size) == 0);
    CHECK(r.id == 0xabcd && r.nrr == m.nrr && strcmp(r.qname, m.qname) == 0);
    for (size_t i = 0; i < r.nrr; i++)
        if (r.rr[i].type != DNS_TYPE_OPT)
            CHECK(r.rr[i].ttl == (m.rr[i].ttl > elapsed ? m.rr[i].ttl - elapsed : 0));

    uint32_t t = dns_msg_min_ttl(&m, data, size, 0xFFFFFFFFu);
    CHECK(t == 0xFFFFFFFFu || t <= 0x7FFFFFFFu);

    size_t max = size / 2 > DNS_HEADER_LEN ? size / 2 : DNS_HEADER_LEN;
    memcpy(copy, data, size);
    size_t n = dns_msg_truncate(copy, size, max);
    CHECK(n >= DNS_HEADER_LEN && n <= max);
    CHECK(dns_msg_parse(&r, copy, n) == 0);
    CHECK(n == size || ((r.flags & DNS_FLAG_TC) && r.nrr == 0 && r.qdcount <= m.qdcount));
    if (r.qdcount > 0)
        CHECK(strcmp(r.qname, m.qname) == 0 && r.qtype == m.qtype);
}

static void
check_cache(const uint8_t *data, size_t size)
{
    static struct dns_cache *c;
    static double now;
    size_t len;

    if (c == NULL)
        c = dns_cache_new(8, 1, 3600, 30);
    CHECK(c != NULL);
    now += 1.5;
    dns_cache_put(c, m.qname, m.qtype, data, size, now);
    int n = dns_cache_get(c, m.qname, m.qtype, now + (size % 100), 0x5a5a, copy, sizeof(copy));
    CHECK(n >= 0);
    if (n > 0) {
        CHECK(dns_msg_parse(&r, copy, (size_t)n) == 0);
        CHECK(r.id == 0x5a5a && strcmp(r.qname, m.qname) == 0 && r.qtype == m.qtype);
    }
    const uint8_t *p = dns_cache_peek(c, m.qname, m.qtype, now, &len);
    if (p != NULL)
        CHECK(len > DNS_HEADER_LEN && dns_msg_parse(&r, p, len) == 0);
    if (size % 17 == 0)
        dns_cache_clear(c);
    struct dns_cache_stats st;
    dns_cache_stats(c, &st);
    CHECK(st.entries <= 8);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > DNS_MSG_MAX)
        return 0;
    check_names(data, size);
    if (size >= DNS_HEADER_LEN) {
        int n = dns_build_formerr(out, sizeof(out), data, size);
        CHECK(n == DNS_HEADER_LEN && dns_msg_parse(&r, out, (size_t)n) == 0);
        CHECK(r.id == (data[0] << 8 | data[1]) && DNS_RCODE(r.flags) == DNS_RCODE_FORMERR);
    }
    if (dns_msg_parse(&m, data, size) < 0)
        return 0;
    CHECK(size >= DNS_HEADER_LEN && m.question_end <= size && m.nrr <= DNS_MAX_RRS);
    CHECK(m.nan + m.nns <= m.nrr && m.nan <= m.ancount && m.nns <= m.nscount);
    for (size_t i = 0; i < m.nrr; i++) {
        CHECK(m.rr[i].rdata_off + m.rr[i].rdlen <= size && m.rr[i].ttl_off + 4 <= size);
        CHECK(m.rr[i].rdata == data + m.rr[i].rdata_off);
        /* As GET /dns/query shows it: always text, or -1 only when the
         * buffer is too small. */
        static char text[2048];
        size_t cap = size % 7 ? sizeof(text) : 16;
        int n = dns_rr_text(data, size, &m.rr[i], text, cap);
        CHECK(n >= -1 && (n < 0 || ((size_t)n < cap && strlen(text) == (size_t)n)));
        CHECK(n >= 0 || cap < sizeof(text) || m.rr[i].rdlen > 1000);
    }
    check_rewrites(data, size);
    if (m.qdcount == 0)
        return 0;
    check_builders(data, size);
    check_cache(data, size);
    return 0;
}
