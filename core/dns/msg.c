#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dns/msg.h"

/* Every name read follows at most this many pointers. Pointers must also
 * go strictly backwards (see name_walk), so this only bounds the work a
 * hostile message can ask for. */
#define MAX_HOPS 64
#define WIRE_NAME_MAX 255 /* RFC 1035 3.1: length octets and labels */
#define RR_FIXED 10       /* type, class, TTL, rdlength */
#define EDNS_UDP_SIZE 1232
#define PTR_TO_QNAME 0xC00C
#define TYPE_SRV 33 /* RFC 2782 */

static inline uint16_t
get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t
get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void
put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void
put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Appends one label byte in presentation form. Bytes that would make the
 * name ambiguous ('.', '\\') or unprintable get RFC 1035 5.1 escapes, so
 * dns_name_write() can turn the text back into the same wire name. */
static inline int
put_char(char *out, size_t outlen, size_t *o, unsigned b)
{
    if (b - 0x21u < 0x5eu && b != '.' && b != '\\') {
        if (*o + 1 >= outlen)
            return -1;
        out[(*o)++] = (char)(b - 'A' < 26u ? b + 32 : b);
        return 0;
    }
    if (*o + 4 >= outlen)
        return -1;
    if (b == '.' || b == '\\') {
        out[(*o)++] = '\\';
        out[(*o)++] = (char)b;
        return 0;
    }
    out[(*o)++] = '\\';
    out[(*o)++] = (char)('0' + b / 100);
    out[(*o)++] = (char)('0' + b / 10 % 10);
    out[(*o)++] = (char)('0' + b % 10);
    return 0;
}

static inline int
marked(const uint8_t *marks, size_t pos)
{
    return marks[pos >> 3] >> (pos & 7) & 1;
}

/* Reads or just checks (out == NULL) the name at *off. Each pointer must
 * aim at the header-free part of the message and strictly before where the
 * current run of labels started: offsets then only decrease, so no loop
 * can form, whatever the hop bound.
 * With |marks| (a bit per message byte), the labels this name spells out
 * itself are marked, and pointers may only land on marked bytes: a name
 * then never runs through a record's TTL, so aging a parsed message can
 * not change how it parses. */
static int
name_walk(const uint8_t *msg, size_t len, size_t *off, char *out, size_t outlen, uint8_t *marks)
{
    size_t pos = *off, limit = *off, end = 0, wire = 1, o = 0;
    int hops = 0;

    for (;;) {
        if (pos >= len)
            return -1;
        if (marks != NULL && hops == 0)
            marks[pos >> 3] |= (uint8_t)(1u << (pos & 7));
        unsigned c = msg[pos];
        if (c == 0)
            break;
        if (c >= 0xC0) {
            if (pos + 1 >= len)
                return -1;
            size_t ptr = (size_t)(c & 0x3F) << 8 | msg[pos + 1];
            if (ptr < DNS_HEADER_LEN || ptr >= limit || ++hops > MAX_HOPS)
                return -1;
            if (marks != NULL && !marked(marks, ptr))
                return -1;
            if (hops == 1)
                end = pos + 2;
            pos = limit = ptr;
            continue;
        }
        if (c > 63) /* 0x40 and 0x80: obsolete extended label types */
            return -1;
        wire += c + 1;
        if (wire > WIRE_NAME_MAX || c >= len - pos)
            return -1;
        if (out != NULL) {
            if (o > 0) {
                if (o + 1 >= outlen)
                    return -1;
                out[o++] = '.';
            }
            for (size_t k = 1; k <= c; k++)
                if (put_char(out, outlen, &o, msg[pos + k]) < 0)
                    return -1;
        }
        pos += 1 + c;
    }
    if (out != NULL) {
        if (o >= outlen)
            return -1;
        out[o] = '\0';
    }
    *off = hops ? end : pos + 1;
    return 0;
}

int
dns_name_read(const uint8_t *msg, size_t len, size_t *off, char *out, size_t outlen)
{
    if (out == NULL || outlen == 0)
        return -1;
    return name_walk(msg, len, off, out, outlen, NULL);
}

static inline int
digit(unsigned char c)
{
    return (unsigned)(c - '0') < 10u;
}

/* Decodes one presentation-form character of a label (with its escape)
 * at *p. -1 for a dangling or out-of-range escape. */
static int
get_char(const char **p)
{
    const unsigned char *s = (const unsigned char *)*p;
    if (s[0] != '\\') {
        *p += 1;
        return s[0];
    }
    if (digit(s[1]) && digit(s[2]) && digit(s[3])) {
        int v = (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
        *p += 4;
        return v > 255 ? -1 : v;
    }
    if (s[1] == '\0')
        return -1;
    *p += 2;
    return s[1];
}

int
dns_name_write(uint8_t *out, size_t cap, const char *name)
{
    const char *p = name;
    size_t o = 0;

    if (p[0] == '.' && p[1] == '\0') /* "." is the root too */
        p++;
    while (*p != '\0') {
        size_t lenpos = o++, n = 0;
        while (*p != '\0' && *p != '.') {
            int b = get_char(&p);
            if (b < 0 || n == 63 || o >= cap)
                return -1;
            out[o++] = (uint8_t)b;
            n++;
        }
        if (n == 0 || o >= WIRE_NAME_MAX)
            return -1;
        out[lenpos] = (uint8_t)n;
        if (*p == '.')
            p++; /* a single final dot is accepted: "a.b." */
    }
    if (o >= cap)
        return -1;
    out[o++] = 0;
    return (int)o;
}

/* Record data that others read in place must be well formed: addresses
 * have their size, and names inside rdata end exactly where it does. A
 * name in rdata may point backwards anywhere, so checking it against
 * |end| as the message length is exact. */
static int
check_rdata(const uint8_t *buf, const struct dns_rr *rr, uint8_t *marks)
{
    size_t p = rr->rdata_off, end = p + rr->rdlen;

    switch (rr->type) {
    case DNS_TYPE_A:
        return rr->klass != DNS_CLASS_IN || rr->rdlen == 4 ? 0 : -1;
    case DNS_TYPE_AAAA:
        return rr->klass != DNS_CLASS_IN || rr->rdlen == 16 ? 0 : -1;
    case DNS_TYPE_CNAME:
    case DNS_TYPE_NS:
    case DNS_TYPE_PTR:
        break;
    case DNS_TYPE_MX:
        if (rr->rdlen < 2)
            return -1;
        p += 2;
        break;
    case TYPE_SRV: /* its target is never compressed, but others may point into it */
        if (rr->rdlen < 6)
            return -1;
        p += 6;
        break;
    case DNS_TYPE_SOA:
        if (name_walk(buf, end, &p, NULL, 0, marks) < 0 ||
            name_walk(buf, end, &p, NULL, 0, marks) < 0)
            return -1;
        return end - p == 20 ? 0 : -1;
    default:
        return 0;
    }
    if (name_walk(buf, end, &p, NULL, 0, marks) < 0)
        return -1;
    return p == end ? 0 : -1;
}

static int
parse_rr(const uint8_t *buf, size_t len, size_t *off, struct dns_rr *rr, uint8_t *marks)
{
    size_t p = *off;

    if (name_walk(buf, len, &p, rr->name, sizeof(rr->name), marks) < 0 || len - p < RR_FIXED)
        return -1;
    rr->type = get16(buf + p);
    rr->klass = get16(buf + p + 2);
    rr->ttl = get32(buf + p + 4);
    rr->rdlen = get16(buf + p + 8);
    rr->ttl_off = p + 4;
    rr->rdata_off = p + RR_FIXED;
    rr->rdata = buf + rr->rdata_off;
    if (rr->rdlen > len - rr->rdata_off)
        return -1;
    /* RFC 2181 8: a TTL with the top bit set means zero (OPT's is flags). */
    if (rr->ttl > 0x7FFFFFFFu && rr->type != DNS_TYPE_OPT)
        rr->ttl = 0;
    if (check_rdata(buf, rr, marks) < 0)
        return -1;
    *off = rr->rdata_off + rr->rdlen;
    return 0;
}

static int
parse_question(struct dns_msg *m, const uint8_t *buf, size_t len, size_t *off, uint8_t *marks)
{
    char skip[DNS_NAME_MAX + 1];
    int first = *off == DNS_HEADER_LEN;

    if (name_walk(buf, len, off, first ? m->qname : skip, sizeof(skip), marks) < 0 ||
        len - *off < 4)
        return -1;
    if (first) {
        m->qtype = get16(buf + *off);
        m->qclass = get16(buf + *off + 2);
        m->question_end = *off + 4;
    }
    *off += 4;
    return 0;
}

/* The OPT record (RFC 6891 6.1.1): only one, owned by the root, only in
 * the additional section; a payload size under 512 means 512. */
static int
note_opt(struct dns_msg *m, const struct dns_rr *rr, int additional)
{
    if (!additional || m->has_edns || rr->name[0] != '\0')
        return -1;
    m->has_edns = 1;
    m->edns_udp_size = rr->klass < DNS_UDP_MAX ? DNS_UDP_MAX : rr->klass;
    return 0;
}

int
dns_msg_parse(struct dns_msg *m, const uint8_t *buf, size_t len)
{
    struct dns_rr scratch;
    uint8_t marks[DNS_MSG_MAX / 8 + 1]; /* only the first len / 8 + 1 are used */
    size_t off = DNS_HEADER_LEN;

    if (len < DNS_HEADER_LEN || len > DNS_MSG_MAX)
        return -1;
    m->id = get16(buf);
    m->flags = get16(buf + 2);
    m->qdcount = get16(buf + 4);
    m->ancount = get16(buf + 6);
    m->nscount = get16(buf + 8);
    m->arcount = get16(buf + 10);
    m->qname[0] = '\0';
    m->qtype = m->qclass = 0;
    m->question_end = DNS_HEADER_LEN;
    m->has_edns = 0;
    m->edns_udp_size = 0;
    m->nrr = m->nan = m->nns = 0;
    memset(marks, 0, len / 8 + 1);

    for (size_t i = 0; i < m->qdcount; i++)
        if (parse_question(m, buf, len, &off, marks) < 0)
            return -1;
    /* Each record takes at least 11 bytes: refuse impossible counts early. */
    size_t nan = m->ancount, nns = m->nscount, total = nan + nns + m->arcount;
    if (total > (len - off) / (RR_FIXED + 1))
        return -1;
    for (size_t i = 0; i < total; i++) {
        struct dns_rr *rr = m->nrr < DNS_MAX_RRS ? &m->rr[m->nrr] : &scratch;
        if (parse_rr(buf, len, &off, rr, marks) < 0)
            return -1;
        if (rr->type == DNS_TYPE_OPT && note_opt(m, rr, i >= nan + nns) < 0)
            return -1;
        if (rr == &scratch)
            continue;
        m->nrr++;
        if (i < nan)
            m->nan++;
        else if (i < nan + nns)
            m->nns++;
    }
    return 0;
}

/* Header and question of a reply to |q|; returns the offset after them. */
static int
begin_reply(uint8_t *out, size_t cap, const struct dns_msg *q, int rcode, uint16_t an, uint16_t ns)
{
    if (cap < DNS_HEADER_LEN + 5)
        return -1;
    uint16_t keep = q->flags & (DNS_FLAG_RD | 0x7800); /* RD and the opcode */
    put16(out, q->id);
    put16(out + 2, (uint16_t)(DNS_FLAG_QR | DNS_FLAG_RA | keep | (rcode & 0xF)));
    put16(out + 4, 1);
    put16(out + 6, an);
    put16(out + 8, ns);
    put16(out + 10, q->has_edns ? 1 : 0);
    int n = dns_name_write(out + DNS_HEADER_LEN, cap - DNS_HEADER_LEN - 4, q->qname);
    if (n < 0)
        return -1;
    size_t off = DNS_HEADER_LEN + (size_t)n;
    put16(out + off, q->qtype);
    put16(out + off + 2, q->qclass);
    return (int)off + 4;
}

/* Owner (a pointer to the question name), type, class IN, TTL, rdlength. */
static size_t
put_rr_head(uint8_t *p, uint16_t type, uint32_t ttl, uint16_t rdlen)
{
    put16(p, PTR_TO_QNAME);
    put16(p + 2, type);
    put16(p + 4, DNS_CLASS_IN);
    put32(p + 6, ttl);
    put16(p + 10, rdlen);
    return 12;
}

static int
end_reply(uint8_t *out, size_t cap, const struct dns_msg *q, size_t off)
{
    static const uint8_t opt[11] = {0, 0, DNS_TYPE_OPT, EDNS_UDP_SIZE >> 8, EDNS_UDP_SIZE & 0xFF};

    if (!q->has_edns)
        return (int)off;
    if (cap - off < sizeof(opt))
        return -1;
    memcpy(out + off, opt, sizeof(opt));
    return (int)(off + sizeof(opt));
}

int
dns_build_addrs(uint8_t *out, size_t cap, const struct dns_msg *q, const uint8_t *addrs, size_t n,
                uint32_t ttl)
{
    size_t alen = q->qtype == DNS_TYPE_A ? 4 : q->qtype == DNS_TYPE_AAAA ? 16 : 0;

    if (n > 0 && alen == 0)
        return -1;
    if (n > (DNS_MSG_MAX / 16))
        return -1;
    int r = begin_reply(out, cap, q, DNS_RCODE_NOERROR, (uint16_t)n, 0);
    if (r < 0)
        return -1;
    size_t off = (size_t)r;
    if (n > (cap - off) / (12 + alen))
        return -1;
    for (size_t i = 0; i < n; i++) {
        off += put_rr_head(out + off, q->qtype, ttl, (uint16_t)alen);
        memcpy(out + off, addrs + i * alen, alen);
        off += alen;
    }
    return end_reply(out, cap, q, off);
}

/* RFC 2308 3: the SOA's TTL and MINIMUM both say how long to cache the
 * negative answer. Owner is the question name, so resolvers that want the
 * SOA at or above the name accept it; MNAME/RNAME are placeholders. */
static const uint8_t soa_names[] = {5,   'c', 'h', 'u', 't', 'e', 7,   'i', 'n', 'v', 'a',
                                    'l', 'i', 'd', 0,   10,  'h', 'o', 's', 't', 'm', 'a',
                                    's', 't', 'e', 'r', 5,   'c', 'h', 'u', 't', 'e', 7,
                                    'i', 'n', 'v', 'a', 'l', 'i', 'd', 0};

static size_t
put_soa(uint8_t *p, uint32_t ttl)
{
    size_t off = put_rr_head(p, DNS_TYPE_SOA, ttl, (uint16_t)(sizeof(soa_names) + 20));
    memcpy(p + off, soa_names, sizeof(soa_names));
    off += sizeof(soa_names);
    put32(p + off, 1);          /* serial */
    put32(p + off + 4, 3600);   /* refresh */
    put32(p + off + 8, 600);    /* retry */
    put32(p + off + 12, 86400); /* expire */
    put32(p + off + 16, ttl);   /* minimum: the negative TTL */
    return off + 20;
}

#define SOA_RR_LEN (12 + sizeof(soa_names) + 20)

int
dns_build_error(uint8_t *out, size_t cap, const struct dns_msg *q, int rcode, uint32_t negative_ttl)
{
    int soa = negative_ttl > 0 && (rcode == DNS_RCODE_NXDOMAIN || rcode == DNS_RCODE_NOERROR);
    int r = begin_reply(out, cap, q, rcode, 0, (uint16_t)soa);
    if (r < 0)
        return -1;
    size_t off = (size_t)r;
    if (soa) {
        if (cap - off < SOA_RR_LEN)
            return -1;
        off += put_soa(out + off, negative_ttl);
    }
    return end_reply(out, cap, q, off);
}

int
dns_build_formerr(uint8_t *out, size_t cap, const uint8_t *query, size_t len)
{
    if (len < DNS_HEADER_LEN || cap < DNS_HEADER_LEN)
        return -1;
    uint16_t keep = get16(query + 2) & (DNS_FLAG_RD | 0x7800);
    memset(out, 0, DNS_HEADER_LEN);
    out[0] = query[0];
    out[1] = query[1];
    put16(out + 2, (uint16_t)(DNS_FLAG_QR | DNS_FLAG_RA | keep | DNS_RCODE_FORMERR));
    return DNS_HEADER_LEN;
}

int
dns_build_query(uint8_t *out, size_t cap, uint16_t id, const char *name, uint16_t type,
                uint16_t udp_size)
{
    static const uint8_t opt[5] = {0, 0, DNS_TYPE_OPT};

    if (cap < DNS_HEADER_LEN + 5)
        return -1;
    memset(out, 0, DNS_HEADER_LEN);
    put16(out, id);
    put16(out + 2, DNS_FLAG_RD);
    put16(out + 4, 1);
    put16(out + 10, udp_size ? 1 : 0);
    int n = dns_name_write(out + DNS_HEADER_LEN, cap - DNS_HEADER_LEN - 4, name);
    if (n < 0)
        return -1;
    size_t off = DNS_HEADER_LEN + (size_t)n;
    put16(out + off, type);
    put16(out + off + 2, DNS_CLASS_IN);
    off += 4;
    if (udp_size == 0)
        return (int)off;
    if (cap - off < 11)
        return -1;
    memcpy(out + off, opt, sizeof(opt));
    put16(out + off + 3, udp_size);
    memset(out + off + 5, 0, 6); /* extended rcode, version, flags, rdlength */
    return (int)(off + 11);
}

size_t
dns_msg_truncate(uint8_t *msg, size_t len, size_t max)
{
    if (len <= max)
        return len;
    if (len < DNS_HEADER_LEN || max < DNS_HEADER_LEN)
        return 0; /* not even a header fits: nothing to send */
    size_t off = DNS_HEADER_LEN, kept = 0, qd = get16(msg + 4);
    /* Keep the questions that read and fit; names in them only point
     * backwards, so cutting after any of them leaves no dangling pointer. */
    while (kept < qd) {
        size_t p = off;
        if (name_walk(msg, len, &p, NULL, 0, NULL) < 0 || p + 4 > max)
            break;
        off = p + 4;
        kept++;
    }
    put16(msg + 2, get16(msg + 2) | DNS_FLAG_TC);
    put16(msg + 4, (uint16_t)kept);
    memset(msg + 6, 0, 6);
    return off;
}

/* MINIMUM is the last field of SOA rdata, which parsing checked. */
static uint32_t
soa_ttl(const struct dns_rr *rr, const uint8_t *buf, size_t len)
{
    size_t end = rr->rdata_off + rr->rdlen;
    if (rr->rdlen < 22 || end > len)
        return rr->ttl;
    uint32_t min = get32(buf + end - 4);
    if (min > 0x7FFFFFFFu)
        min = 0;
    return min < rr->ttl ? min : rr->ttl;
}

uint32_t
dns_msg_min_ttl(const struct dns_msg *m, const uint8_t *buf, size_t len, uint32_t dflt)
{
    int rc = DNS_RCODE(m->flags);
    int negative = rc == DNS_RCODE_NXDOMAIN || (rc == DNS_RCODE_NOERROR && m->ancount == 0);
    int soa = 0, any = 0;
    uint32_t min = UINT32_MAX;

    for (size_t i = 0; i < m->nan + m->nns; i++) {
        const struct dns_rr *rr = &m->rr[i];
        uint32_t t = rr->ttl;
        if (rr->type == DNS_TYPE_OPT)
            continue;
        if (rr->type == DNS_TYPE_SOA && i >= m->nan) {
            t = soa_ttl(rr, buf, len);
            soa = 1;
        }
        if (t < min)
            min = t;
        any = 1;
    }
    /* Negative answers without an SOA should not be trusted for long
     * (RFC 2308 5): the caller's default caps them. */
    if (!any || (negative && !soa && dflt < min))
        return dflt;
    return min;
}

static void
age_one(uint8_t *buf, size_t len, size_t ttl_off, uint32_t ttl, uint32_t elapsed)
{
    if (ttl_off + 4 <= len)
        put32(buf + ttl_off, ttl > elapsed ? ttl - elapsed : 0);
}

void
dns_msg_age(uint8_t *buf, size_t len, const struct dns_msg *m, uint32_t elapsed, uint16_t id)
{
    size_t total = (size_t)m->ancount + m->nscount + m->arcount, off;

    if (len < DNS_HEADER_LEN)
        return;
    put16(buf, id);
    for (size_t i = 0; i < m->nrr; i++)
        if (m->rr[i].type != DNS_TYPE_OPT)
            age_one(buf, len, m->rr[i].ttl_off, m->rr[i].ttl, elapsed);
    if (m->nrr == 0 || m->nrr >= total)
        return;
    /* Records past DNS_MAX_RRS were not kept: walk them in |buf|. */
    off = m->rr[m->nrr - 1].rdata_off + m->rr[m->nrr - 1].rdlen;
    for (size_t i = m->nrr; i < total; i++) {
        if (name_walk(buf, len, &off, NULL, 0, NULL) < 0 || len - off < RR_FIXED)
            return;
        uint32_t ttl = get32(buf + off + 4);
        if (get16(buf + off) != DNS_TYPE_OPT)
            age_one(buf, len, off + 4, ttl > 0x7FFFFFFFu ? 0 : ttl, elapsed);
        off += RR_FIXED + get16(buf + off + 8);
    }
}

static const struct {
    uint16_t type;
    const char *name;
} type_names[] = {
    {DNS_TYPE_A, "A"},
    {DNS_TYPE_NS, "NS"},
    {DNS_TYPE_CNAME, "CNAME"},
    {DNS_TYPE_SOA, "SOA"},
    {DNS_TYPE_PTR, "PTR"},
    {DNS_TYPE_MX, "MX"},
    {DNS_TYPE_TXT, "TXT"},
    {DNS_TYPE_AAAA, "AAAA"},
    {TYPE_SRV, "SRV"},
    {DNS_TYPE_OPT, "OPT"},
    {43, "DS"},
    {46, "RRSIG"},
    {47, "NSEC"},
    {48, "DNSKEY"},
    {64, "SVCB"},
    {DNS_TYPE_HTTPS, "HTTPS"},
    {DNS_TYPE_ANY, "ANY"},
    {257, "CAA"},
};

const char *
dns_type_name(uint16_t type, char *buf, size_t len)
{
    for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++)
        if (type_names[i].type == type)
            return type_names[i].name;
    if (buf == NULL || len == 0)
        return "TYPE?";
    snprintf(buf, len, "TYPE%u", (unsigned)type);
    return buf;
}

int
dns_type_parse(const char *name)
{
    for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++)
        if (strcasecmp(type_names[i].name, name) == 0)
            return type_names[i].type;
    if (strncasecmp(name, "TYPE", 4) != 0 || name[4] < '0' || name[4] > '9')
        return -1;
    char *end;
    unsigned long v = strtoul(name + 4, &end, 10);
    return *end == '\0' && v <= 65535 ? (int)v : -1;
}
