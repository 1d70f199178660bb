/* libFuzzer target for the resolver's answer extraction
 * (dns_resolve_extract in core/dns/resolve.c): the addresses an upstream's
 * parsed answer gives a name, through its CNAME chain, for chute's own
 * connections and the reverse map.
 *
 * Input: [mode][rest]. Mode bit 0 clear: |rest| is an upstream's answer
 * (in a heap block of its size). Once it parses, the question's name and
 * the owner of one answer record are looked up for A and AAAA: the result
 * must follow the rcode, the addresses must be exactly the first records
 * of some name the answer's CNAMEs lead to (of that name itself when it
 * has no CNAME), and dns_build_addrs' answer to the message taken as a
 * query, with addresses from the input, must parse and give them back.
 * Mode bit 0 set: |rest| describes an answer this file writes itself (see
 * build()): a CNAME chain of up to 24 names, its addresses, records to be
 * ignored, letter case, compression, record order; the addresses must be
 * exactly those of the chain's end, when 16 hops reach it. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dns/msg.h"
#include "dns/resolve_int.h"
#include "fuzz.h"

#define HOPS 16 /* resolve.c's CNAME_HOPS */

static struct dns_msg m, q2, back;
static uint8_t wire[DNS_MSG_MAX];

struct result {
    struct slot s;
    struct dns_addr a[DNS_MAX_ADDRS];
};

static void
extract(const uint8_t *buf, size_t len, const struct dns_msg *msg, const char *name, uint16_t type,
        struct result *r)
{
    memset(r, 0xa5, sizeof(*r));
    dns_resolve_extract(buf, len, msg, name, type, &r->s, r->a);
    CHECK(r->s.state == S_DONE && r->s.n <= DNS_MAX_ADDRS);
    int rcode = DNS_RCODE(msg->flags);
    if (rcode == DNS_RCODE_NXDOMAIN)
        CHECK(r->s.nx == 1 && r->s.err == dns_err_not_found && r->s.n == 0);
    else if (rcode != DNS_RCODE_NOERROR)
        CHECK(r->s.err == dns_err_servfail && r->s.n == 0);
    else
        CHECK(r->s.n > 0 ? r->s.err == NULL : r->s.err == dns_err_not_found);
    for (size_t i = 0; i < r->s.n; i++)
        CHECK(r->a[i].version == (type == DNS_TYPE_A ? 4 : 6) && r->a[i].scope == 0);
}

/* Whether |r| holds exactly the first addresses |msg| has for |owner|. */
static int
is_list_of(const struct dns_msg *msg, const char *owner, uint16_t type, const struct result *r)
{
    size_t alen = type == DNS_TYPE_A ? 4 : 16, n = 0;
    for (size_t i = 0; i < msg->nan && n < DNS_MAX_ADDRS; i++) {
        const struct dns_rr *rr = &msg->rr[i];
        if (rr->type != type || rr->klass != DNS_CLASS_IN || rr->rdlen != alen ||
            strcmp(rr->name, owner) != 0)
            continue;
        if (n >= r->s.n || memcmp(r->a[n].ip, rr->rdata, alen) != 0)
            return 0;
        n++;
    }
    return n == r->s.n;
}

static int
is_cname(const struct dns_rr *rr)
{
    return rr->type == DNS_TYPE_CNAME && rr->klass == DNS_CLASS_IN;
}

static int
has_cname(const struct dns_msg *msg, const char *owner)
{
    for (size_t i = 0; i < msg->nan; i++)
        if (is_cname(&msg->rr[i]) && strcmp(msg->rr[i].name, owner) == 0)
            return 1;
    return 0;
}

static void
check_raw(const uint8_t *buf, size_t len, const struct dns_msg *msg, const char *name,
          uint16_t type)
{
    struct result r, again;

    extract(buf, len, msg, name, type, &r);
    extract(buf, len, msg, name, type, &again);
    CHECK(again.s.n == r.s.n && memcmp(again.a, r.a, r.s.n * sizeof(r.a[0])) == 0);
    if (DNS_RCODE(msg->flags) != DNS_RCODE_NOERROR)
        return;
    if (!has_cname(msg, name)) {
        CHECK(is_list_of(msg, name, type, &r));
        return;
    }
    if (r.s.n == 0)
        return;
    /* Some name a CNAME of the answer names owns exactly these. */
    for (size_t i = 0; i < msg->nan; i++) {
        char t[DNS_NAME_MAX + 1];
        size_t off = msg->rr[i].rdata_off;
        if (is_cname(&msg->rr[i]) && dns_name_read(buf, len, &off, t, sizeof(t)) == 0 &&
            is_list_of(msg, t, type, &r))
            return;
    }
    CHECK(!"addresses of no name the chain reaches");
}

/* The message taken as a query: chute's own answer with |n| addresses from
 * |addrs| must parse and give them back, in order. */
static void
round_trip(const struct dns_msg *msg, uint16_t type, const uint8_t *addrs, size_t n)
{
    size_t alen = type == DNS_TYPE_A ? 4 : 16;
    struct result r;

    q2 = *msg;
    q2.qtype = type;
    q2.qclass = DNS_CLASS_IN;
    int len = dns_build_addrs(wire, sizeof(wire), &q2, addrs, n, 60);
    CHECK(len > 0);
    CHECK(dns_msg_parse(&back, wire, (size_t)len) == 0);
    CHECK(back.id == msg->id && back.qdcount == 1 && back.nan == n && back.qtype == type);
    CHECK(strcmp(back.qname, msg->qname) == 0 && back.has_edns == msg->has_edns);
    extract(wire, (size_t)len, &back, msg->qname, type, &r);
    CHECK(r.s.n == (n < DNS_MAX_ADDRS ? n : DNS_MAX_ADDRS));
    for (size_t i = 0; i < r.s.n; i++)
        CHECK(memcmp(r.a[i].ip, addrs + i * alen, alen) == 0);
}

static void
raw(const uint8_t *data, size_t size)
{
    if (size > DNS_MSG_MAX)
        return;
    uint8_t *buf = malloc(size ? size : 1);
    CHECK(buf != NULL);
    memcpy(buf, data, size);
    if (dns_msg_parse(&m, buf, size) == 0) {
        static const uint16_t types[2] = {DNS_TYPE_A, DNS_TYPE_AAAA};
        for (int t = 0; t < 2; t++) {
            check_raw(buf, size, &m, m.qname, types[t]);
            if (m.nan > 0)
                check_raw(buf, size, &m, m.rr[size % m.nan].name, types[t]);
        }
        /* Addresses: the input's last bytes, as many as fit 20. */
        size_t n4 = size / 4 < 20 ? size / 4 : 20, n6 = size / 16 < 20 ? size / 16 : 20;
        if (m.qdcount == 1 && m.qname[0] != '\0') {
            round_trip(&m, DNS_TYPE_A, buf + size - n4 * 4, n4);
            round_trip(&m, DNS_TYPE_AAAA, buf + size - n6 * 16, n6);
        }
    }
    free(buf);
}

/* ---- answers written here ------------------------------------------------ */

#define MAX_CHAIN 24
#define MAX_ADDRS 20

enum {
    F_V6 = 1,          /* AAAA, else A */
    F_UPPER = 2,       /* the names in the message in upper case */
    F_COMPRESS = 4,    /* names already written are pointed to */
    F_REVERSED = 8,    /* addresses first, then the chain from its end */
    F_DECOY_HEAD = 16, /* the first name also owns an address (ignored: it has a CNAME) */
    F_DECOY_OTHER = 32,/* the end also owns addresses of the other type */
    F_DECOY_CLASS = 64,/* and one of class CHAOS, not an Internet address */
    F_CNAME_CLASS = 128, /* and a CHAOS CNAME back to the first name */
};

struct writer {
    uint8_t b[DNS_MSG_MAX];
    size_t len;
    int upper, compress;
    char names[MAX_CHAIN + 1][64];
    size_t at[MAX_CHAIN + 1]; /* where name i was first spelled out, 0: not yet */
};

static struct writer w;

static void
put16(uint16_t v)
{
    w.b[w.len++] = (uint8_t)(v >> 8);
    w.b[w.len++] = (uint8_t)v;
}

static void
put_name(size_t i)
{
    if (w.compress && w.at[i] != 0) {
        put16((uint16_t)(0xc000 | w.at[i]));
        return;
    }
    if (w.at[i] == 0)
        w.at[i] = w.len;
    const char *s = w.names[i];
    while (*s) {
        size_t l = strcspn(s, ".");
        w.b[w.len++] = (uint8_t)l;
        for (size_t k = 0; k < l; k++)
            w.b[w.len++] = (uint8_t)(w.upper && s[k] >= 'a' && s[k] <= 'z' ? s[k] - 32 : s[k]);
        s += l + (s[l] == '.');
    }
    w.b[w.len++] = 0;
}

static void
put_rr(size_t owner, uint16_t type, uint16_t klass, const uint8_t *rdata, size_t rdlen)
{
    put_name(owner);
    put16(type);
    put16(klass);
    put16(0), put16(300); /* TTL */
    put16((uint16_t)rdlen);
    memcpy(w.b + w.len, rdata, rdlen);
    w.len += rdlen;
}

static void
put_cname_to(size_t from, size_t to, uint16_t klass)
{
    put_name(from);
    put16(DNS_TYPE_CNAME);
    put16(klass);
    put16(0), put16(300);
    size_t rdlen_at = w.len;
    put16(0);
    put_name(to);
    size_t rdlen = w.len - rdlen_at - 2;
    w.b[rdlen_at] = (uint8_t)(rdlen >> 8);
    w.b[rdlen_at + 1] = (uint8_t)rdlen;
}

static void
put_cname(size_t from)
{
    put_cname_to(from, from + 1, DNS_CLASS_IN);
}

/* [flags][rcode][chain length][address count][name bytes...]: each name
 * is a label of 1 to 20 letters or digits from the input, then ".c<i>.test",
 * so the names differ; addresses are 192.0.2.<i> or 2001:db8::<i>. */
static void
build(const uint8_t *p, size_t n)
{
    if (n < 4)
        return;
    unsigned flags = p[0];
    int rcode = p[1] % 4; /* NOERROR, FORMERR, SERVFAIL, NXDOMAIN */
    size_t k = p[2] % (MAX_CHAIN + 1), naddr = p[3] % (MAX_ADDRS + 1);
    uint16_t type = flags & F_V6 ? DNS_TYPE_AAAA : DNS_TYPE_A;
    uint16_t other = flags & F_V6 ? DNS_TYPE_A : DNS_TYPE_AAAA;
    size_t alen = flags & F_V6 ? 16 : 4, olen = 20 - alen;
    p += 4, n -= 4;

    memset(&w, 0, sizeof(w));
    w.upper = (flags & F_UPPER) != 0;
    w.compress = (flags & F_COMPRESS) != 0;
    for (size_t i = 0; i <= k; i++) {
        char label[21];
        size_t l = 0, want = n > 0 ? 1 + p[0] % 20 : 1;
        for (; l < want; l++) {
            unsigned c = l + 1 < n ? p[l + 1] : 'x';
            label[l] = "abcdefghijklmnopqrstuvwxyz0123456789"[c % 36];
        }
        label[l] = '\0';
        p += n > want ? want + 1 : n, n -= n > want ? want + 1 : n;
        snprintf(w.names[i], sizeof(w.names[i]), "%s.c%zu.test", label, i);
    }

    uint8_t addr[16] = {0x20, 0x01, 0x0d, 0xb8}, oaddr[16] = {0x20, 0x01, 0x0d, 0xb8};
    size_t nan = k + naddr + ((flags & F_DECOY_HEAD) && k > 0) + !!(flags & F_DECOY_OTHER) +
                 !!(flags & F_DECOY_CLASS) + !!(flags & F_CNAME_CLASS);
    put16(0x1234);
    put16((uint16_t)(DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA | rcode));
    put16(1), put16((uint16_t)nan), put16(0), put16(0);
    put_name(0);
    put16(type), put16(DNS_CLASS_IN);

    if (!(flags & F_REVERSED))
        for (size_t i = 0; i < k; i++)
            put_cname(i);
    if ((flags & F_DECOY_HEAD) && k > 0) {
        memset(addr + 4, 0xee, alen - 4);
        put_rr(0, type, DNS_CLASS_IN, alen == 4 ? (const uint8_t *)"\xc6\x33\x64\xee" : addr, alen);
    }
    for (size_t i = 0; i < naddr; i++) {
        memset(addr + 4, 0, 12);
        if (alen == 4)
            addr[0] = 192, addr[1] = 0, addr[2] = 2;
        addr[alen - 1] = (uint8_t)(i + 1);
        put_rr(k, type, DNS_CLASS_IN, addr, alen);
    }
    if (flags & F_DECOY_OTHER)
        put_rr(k, other, DNS_CLASS_IN, oaddr, olen);
    if (flags & F_DECOY_CLASS)
        put_rr(k, type, 3 /* CH */, (const uint8_t *)"\x7f\x00\x00\x01\x00\x00\x00\x00\x00\x00"
                                                     "\x00\x00\x00\x00\x00\x01",
               alen);
    if (flags & F_REVERSED)
        for (size_t i = k; i-- > 0;)
            put_cname(i);
    if (flags & F_CNAME_CLASS)
        put_cname_to(k, 0, 3);

    CHECK(dns_msg_parse(&m, w.b, w.len) == 0 && m.nan == nan);
    struct result r;
    extract(w.b, w.len, &m, w.names[0], type, &r);
    if (rcode != DNS_RCODE_NOERROR)
        return;
    size_t want = k <= HOPS ? (naddr < DNS_MAX_ADDRS ? naddr : DNS_MAX_ADDRS) : 0;
    CHECK(r.s.n == want);
    for (size_t i = 0; i < want; i++)
        CHECK(r.a[i].ip[alen - 1] == i + 1 && (alen == 16 || r.a[i].ip[0] == 192));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        build(data + 1, size - 1);
    else
        raw(data + 1, size - 1);
    return 0;
}
