/* A geosite.dat reader: protobuf's wire format (varints, tags, lengths)
 * over three fixed message shapes. Each message is a slice; a field is a
 * tag varint (number << 3 | wire type) and a value whose size the wire
 * type gives, so any field can be skipped without knowing it. */

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "rules/geosite.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

struct rd {
    const uint8_t *base, *p, *end;
    struct rules_geosite_error *err;
};

/* One field: its number, wire type, and its value (a varint, or the bytes
 * of a LEN field). */
struct field {
    uint64_t num;
    int wt;
    uint64_t v;
    struct mem_slice bytes;
};

static int __attribute__((format(printf, 3, 4)))
bad(struct rd *r, const uint8_t *at, const char *fmt, ...)
{
    va_list ap;

    r->err->offset = (size_t)(at - r->base);
    va_start(ap, fmt);
    vsnprintf(r->err->msg, sizeof(r->err->msg), fmt, ap);
    va_end(ap);
    return RULES_GEOSITE_ERR_FORMAT;
}

static int
varint(struct rd *r, const uint8_t *end, uint64_t *out)
{
    const uint8_t *s = r->p;
    uint64_t v = 0;

    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p >= end)
            return bad(r, s, "truncated varint");
        uint8_t b = *r->p++;
        if (shift == 63 && b > 1)
            return bad(r, s, "varint over 64 bits");
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return bad(r, s, "varint over 64 bits");
}

/* The next field of the message that ends at |end|. */
static int
next_field(struct rd *r, const uint8_t *end, struct field *f)
{
    const uint8_t *s = r->p;
    uint64_t tag = 0, n = 0;

    if (varint(r, end, &tag) != 0)
        return -1;
    f->num = tag >> 3;
    f->wt = (int)(tag & 7);
    if (f->num == 0 || f->num > 0x1fffffff)
        return bad(r, s, "field number %llu", (unsigned long long)f->num);
    switch (f->wt) {
    case WT_VARINT:
        return varint(r, end, &f->v);
    case WT_I64:
    case WT_I32:
        n = f->wt == WT_I64 ? 8 : 4;
        if ((uint64_t)(end - r->p) < n)
            return bad(r, s, "truncated fixed-size field %llu", (unsigned long long)f->num);
        r->p += n;
        return 0;
    case WT_LEN:
        if (varint(r, end, &n) != 0)
            return -1;
        if (n > (uint64_t)(end - r->p))
            return bad(r, s, "field %llu: length %llu past the end (%zu bytes left)",
                       (unsigned long long)f->num, (unsigned long long)n, (size_t)(end - r->p));
        f->bytes = mem_slice(r->p, (size_t)n);
        r->p += n;
        return 0;
    default: /* 3 and 4 are protobuf's deprecated groups; 6 and 7 do not exist */
        return bad(r, s, "field %llu: wire type %d (not a geosite.dat?)",
                   (unsigned long long)f->num, f->wt);
    }
}

static int
want_field(struct rd *r, const uint8_t *at, const struct field *f, int wt, const char *what)
{
    if (f->wt == wt)
        return 0;
    return bad(r, at, "%s (field %llu) has wire type %d, not %d", what,
               (unsigned long long)f->num, f->wt, wt);
}

static int
code_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.' || c == '!';
}

int
rules_geosite_want_parse(struct mem_slice name, struct rules_geosite_want *w, char *msg,
                         size_t msglen)
{
    const char *p = name.ptr, *end = name.ptr + name.len;
    int part = 0;

    memset(w, 0, sizeof(*w));
    for (;;) {
        const char *at = memchr(p, '@', (size_t)(end - p));
        struct mem_slice s = mem_slice(p, (size_t)((at ? at : end) - p));

        if (s.len == 0 || s.len > 64) {
            snprintf(msg, msglen, "empty or over-long %s in '%.*s'", part ? "attribute" : "site name",
                     (int)(name.len > 64 ? 64 : name.len), name.ptr);
            return -1;
        }
        for (size_t i = 0; i < s.len; i++) {
            if (!code_char(s.ptr[i])) {
                snprintf(msg, msglen, "bad character in GEOSITE '%.*s' (letters, digits, - _ . !, "
                         "then @attribute)", (int)(name.len > 64 ? 64 : name.len), name.ptr);
                return -1;
            }
        }
        if (part == 0) {
            w->code = s;
        } else if (w->nattrs == RULES_GEOSITE_MAX_ATTRS) {
            snprintf(msg, msglen, "more than %d @attributes in '%.*s'", RULES_GEOSITE_MAX_ATTRS,
                     (int)(name.len > 64 ? 64 : name.len), name.ptr);
            return -1;
        } else {
            w->attrs[w->nattrs++] = s;
        }
        part++;
        if (at == NULL)
            return 0;
        p = at + 1;
    }
}

static int
ieq(struct mem_slice a, struct mem_slice b)
{
    return a.len == b.len && strncasecmp(a.ptr, b.ptr, a.len) == 0;
}

/* One Domain message: its type, value and attribute keys, then the wants
 * of this site that it satisfies. */
static int
domain(struct rd *r, struct mem_slice msg, struct rules_geosite_want *wants, const size_t *mine,
       size_t nmine, rules_geosite_cb cb, void *arg)
{
    struct mem_slice value = {NULL, 0}, keys[RULES_GEOSITE_DOMAIN_ATTRS];
    size_t nkeys = 0;
    uint64_t type = 0;
    struct field f;
    struct rd sub = *r;

    sub.p = (const uint8_t *)msg.ptr;
    const uint8_t *end = sub.p + msg.len;
    while (sub.p < end) {
        const uint8_t *at = sub.p;
        if (next_field(&sub, end, &f) != 0)
            return -1;
        if (f.num == 1) {
            if (want_field(&sub, at, &f, WT_VARINT, "domain type") != 0)
                return -1;
            if (f.v > RULES_GEOSITE_FULL)
                return bad(&sub, at, "unknown domain type %llu (0 plain, 1 regex, 2 domain, 3 full)",
                           (unsigned long long)f.v);
            type = f.v;
        } else if (f.num == 2) {
            if (want_field(&sub, at, &f, WT_LEN, "domain value") != 0)
                return -1;
            value = f.bytes;
        } else if (f.num == 3) {
            if (want_field(&sub, at, &f, WT_LEN, "domain attribute") != 0)
                return -1;
            if (nkeys == RULES_GEOSITE_DOMAIN_ATTRS)
                return bad(&sub, at, "a domain with more than %d attributes",
                           RULES_GEOSITE_DOMAIN_ATTRS);
            /* Attribute { string key = 1; bool/int value }: the key is all
             * v2ray compares. */
            struct rd a = sub;
            a.p = (const uint8_t *)f.bytes.ptr;
            const uint8_t *aend = a.p + f.bytes.len;
            struct mem_slice key = {NULL, 0};
            while (a.p < aend) {
                const uint8_t *aat = a.p;
                struct field g;
                if (next_field(&a, aend, &g) != 0)
                    return -1;
                if (g.num == 1 && want_field(&a, aat, &g, WT_LEN, "attribute key") != 0)
                    return -1;
                if (g.num == 1)
                    key = g.bytes;
            }
            keys[nkeys++] = key;
        }
    }
    for (size_t i = 0; i < nmine; i++) {
        struct rules_geosite_want *w = &wants[mine[i]];
        size_t have = 0;
        for (size_t k = 0; k < w->nattrs; k++)
            for (size_t j = 0; j < nkeys; j++)
                if (ieq(w->attrs[k], keys[j])) {
                    have++;
                    break;
                }
        if (have < w->nattrs)
            continue;
        if (value.len == 0) {
            w->empty++;
            continue;
        }
        w->domains++;
        int rc = cb != NULL ? cb(arg, mine[i], (enum rules_geosite_kind)type, value) : 0;
        if (rc != 0)
            return rc;
    }
    return 0;
}

#define MAX_MINE 64

/* One GeoSite message: its code first (wherever the field lies), then
 * its domains if it is wanted. */
static int
site(struct rd *r, struct mem_slice msg, struct rules_geosite_want *wants, size_t nwants,
     rules_geosite_cb cb, void *arg)
{
    struct mem_slice code = {NULL, 0};
    size_t mine[MAX_MINE], nmine = 0;
    struct field f;
    struct rd sub = *r;
    const uint8_t *start = (const uint8_t *)msg.ptr, *end = start + msg.len;

    for (sub.p = start; sub.p < end;) {
        const uint8_t *at = sub.p;
        if (next_field(&sub, end, &f) != 0)
            return -1;
        if (f.num == 1 && want_field(&sub, at, &f, WT_LEN, "site code") != 0)
            return -1;
        if (f.num == 2 && want_field(&sub, at, &f, WT_LEN, "site domain") != 0)
            return -1;
        if (f.num == 1)
            code = f.bytes;
    }
    for (size_t i = 0; i < nwants && nmine < MAX_MINE; i++)
        if (ieq(wants[i].code, code)) {
            wants[i].sites++;
            mine[nmine++] = i;
        }
    if (nmine == 0)
        return 0;
    for (sub.p = start; sub.p < end;) {
        if (next_field(&sub, end, &f) != 0)
            return -1;
        if (f.num != 2)
            continue;
        int rc = domain(&sub, f.bytes, wants, mine, nmine, cb, arg);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int
rules_geosite_read(const void *buf, size_t len, struct rules_geosite_want *wants,
                   size_t nwants, rules_geosite_cb cb, void *arg, size_t *total,
                   struct rules_geosite_error *err)
{
    struct rules_geosite_error local;
    struct rd r;
    struct field f;
    size_t n = 0;

    if (err == NULL)
        err = &local;
    err->offset = 0;
    err->msg[0] = '\0';
    r.base = r.p = buf != NULL ? buf : (const uint8_t *)"";
    r.end = r.base + (buf != NULL ? len : 0);
    r.err = err;
    for (size_t i = 0; i < nwants; i++)
        wants[i].sites = wants[i].domains = wants[i].empty = 0;
    while (r.p < r.end) {
        const uint8_t *at = r.p;
        if (next_field(&r, r.end, &f) != 0)
            return RULES_GEOSITE_ERR_FORMAT;
        if (f.num != 1)
            continue;
        if (want_field(&r, at, &f, WT_LEN, "site") != 0)
            return RULES_GEOSITE_ERR_FORMAT;
        n++;
        int rc = site(&r, f.bytes, wants, nwants, cb, arg);
        if (rc != 0)
            return rc < 0 ? RULES_GEOSITE_ERR_FORMAT : rc;
    }
    if (total != NULL)
        *total = n;
    return 0;
}
