#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "dns/msg.h"

/* Records in presentation form (RFC 1035 §5.1), the text after a zone-file
 * line's "name TTL class type": what Clash's /dns/query calls "data". */

#define TYPE_SRV 33
#define TYPE_CAA 257

struct out {
    char *p;
    size_t cap, len;
    int full;
};

static void __attribute__((format(printf, 2, 3)))
put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= o->cap - o->len) {
        o->full = 1;
        o->len = o->cap - 1;
        return;
    }
    o->len += (size_t)n;
}

static uint32_t
get16(const uint8_t *p)
{
    return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t
get32(const uint8_t *p)
{
    return get16(p) << 16 | get16(p + 2);
}

/* A name inside the rdata at |*off| (compression allowed: it may point
 * anywhere in the message), with the final dot. -1 if it does not read or
 * runs past |end|. */
static int
name(struct out *o, const uint8_t *msg, size_t len, size_t *off, size_t end)
{
    char n[DNS_NAME_MAX + 1];
    if (*off >= end || dns_name_read(msg, len, off, n, sizeof(n)) != 0 || *off > end)
        return -1;
    put(o, "%s.", n);
    return 0;
}

/* A <character-string>: quoted, '"' and '\' escaped, other bytes outside
 * printable ASCII as \DDD. */
static int
text(struct out *o, const uint8_t *p, size_t *off, size_t end)
{
    if (*off >= end || *off + 1 + p[*off] > end)
        return -1;
    size_t n = p[*off], s = *off + 1;
    put(o, "\"");
    for (size_t i = s; i < s + n; i++) {
        if (p[i] == '"' || p[i] == '\\')
            put(o, "\\%c", p[i]);
        else if (p[i] < 0x20 || p[i] > 0x7e)
            put(o, "\\%03u", p[i]);
        else
            put(o, "%c", p[i]);
    }
    put(o, "\"");
    *off = s + n;
    return 0;
}

static int
known(struct out *o, const uint8_t *msg, size_t len, const struct dns_rr *rr)
{
    const uint8_t *d = rr->rdata;
    size_t off = rr->rdata_off, end = off + rr->rdlen;
    char ip[INET6_ADDRSTRLEN];
    switch (rr->type) {
    case DNS_TYPE_A:
    case DNS_TYPE_AAAA:
        if (rr->rdlen != (rr->type == DNS_TYPE_A ? 4 : 16))
            return -1;
        inet_ntop(rr->type == DNS_TYPE_A ? AF_INET : AF_INET6, d, ip, sizeof(ip));
        put(o, "%s", ip);
        return 0;
    case DNS_TYPE_NS:
    case DNS_TYPE_CNAME:
    case DNS_TYPE_PTR:
        return name(o, msg, len, &off, end) != 0 || off != end ? -1 : 0;
    case DNS_TYPE_MX:
        if (rr->rdlen < 3)
            return -1;
        put(o, "%u ", get16(d));
        off += 2;
        return name(o, msg, len, &off, end) != 0 || off != end ? -1 : 0;
    case TYPE_SRV:
        if (rr->rdlen < 7)
            return -1;
        put(o, "%u %u %u ", get16(d), get16(d + 2), get16(d + 4));
        off += 6;
        return name(o, msg, len, &off, end) != 0 || off != end ? -1 : 0;
    case DNS_TYPE_SOA:
        if (name(o, msg, len, &off, end) != 0)
            return -1;
        put(o, " ");
        if (name(o, msg, len, &off, end) != 0 || end - off != 20)
            return -1;
        put(o, " %u %u %u %u %u", get32(msg + off), get32(msg + off + 4), get32(msg + off + 8),
            get32(msg + off + 12), get32(msg + off + 16));
        return 0;
    case DNS_TYPE_TXT:
        if (rr->rdlen == 0)
            return -1;
        for (int first = 1; off < end; first = 0) {
            if (!first)
                put(o, " ");
            if (text(o, msg, &off, end) != 0)
                return -1;
        }
        return 0;
    case TYPE_CAA: {
        if (rr->rdlen < 2 || 2u + d[1] > rr->rdlen || d[1] == 0)
            return -1;
        put(o, "%u %.*s \"", d[0], (int)d[1], (const char *)d + 2);
        for (size_t i = 2u + d[1]; i < rr->rdlen; i++)
            put(o, d[i] == '"' || d[i] == '\\' ? "\\%c" : d[i] < 0x20 || d[i] > 0x7e ? "\\%03u" : "%c",
                d[i]);
        put(o, "\"");
        return 0;
    }
    default:
        return -1;
    }
}

int
dns_rr_text(const uint8_t *msg, size_t len, const struct dns_rr *rr, char *out, size_t cap)
{
    if (cap == 0 || rr->rdata_off + rr->rdlen > len)
        return -1;
    struct out o = {out, cap, 0, 0};
    out[0] = '\0';
    if (known(&o, msg, len, rr) != 0 || o.full) {
        /* Unknown types, and known ones that do not parse: RFC 3597's
         * generic form, as Clash (miekg/dns) prints them. */
        o.len = 0;
        o.full = 0;
        put(&o, "\\# %u", rr->rdlen);
        if (rr->rdlen > 0)
            put(&o, " ");
        for (size_t i = 0; i < rr->rdlen && !o.full; i++)
            put(&o, "%02x", rr->rdata[i]);
    }
    return o.full ? -1 : (int)o.len;
}
