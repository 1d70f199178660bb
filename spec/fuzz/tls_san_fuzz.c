/* libFuzzer target for the iPAddress SAN check of core/tls/trust.c
 * (tls_der_san_has_ip and the DER walk under it), which reads the server's
 * certificate before chute accepts it for an IP-address host.
 *
 * Input: [mode][rest]. Mode bit 0 clear: |rest| is a certificate as the
 * server sent it, in a heap block of exactly its size. It is asked for
 * every address the bytes themselves carry as an iPAddress TLV (87 04 ..,
 * 87 10 ..) and for one they do not; a "found" must point at such a TLV,
 * and cutting the certificate anywhere inside its outer TLV must make the
 * walk fail, while bytes after it change nothing.
 * Mode bit 0 set: |rest| describes a certificate that this file writes
 * itself (see build()): the GeneralNames, a critical flag, an extension
 * before the SAN, a field before the extensions, long-form lengths; the
 * answer must be exactly whether the names hold the address asked for. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tls/tls_int.h"
#include "fuzz.h"

#define MAX_ASKS 8
#define CERT_MAX (1 << 16)

static const uint8_t other_ip[16] = {0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 0xff, 0xff,
                                     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe};

/* The answer for the first |len| bytes of |der|, read from a block of
 * exactly that size so ASan sees any read past it. */
static int
ask(const uint8_t *der, size_t len, const uint8_t *ip, size_t iplen)
{
    uint8_t *copy = malloc(len ? len : 1);

    CHECK(copy != NULL);
    memcpy(copy, der, len);
    int r = tls_der_san_has_ip(copy, len, ip, iplen);
    free(copy);
    CHECK(r == 0 || r == 1);
    return r;
}

/* 1 if |der| holds the iPAddress TLV for |ip| anywhere. */
static int
has_tlv(const uint8_t *der, size_t len, const uint8_t *ip, size_t iplen)
{
    for (size_t i = 0; i + 2 + iplen <= len; i++)
        if (der[i] == 0x87 && der[i + 1] == iplen && memcmp(der + i + 2, ip, iplen) == 0)
            return 1;
    return 0;
}

/* Where the outer TLV ends (definite lengths of up to 4 bytes), or 0. */
static size_t
outer_end(const uint8_t *der, size_t len)
{
    if (len < 2)
        return 0;
    size_t l = der[1], h = 2;
    if (l & 0x80) {
        size_t n = l & 0x7f;
        if (n == 0 || n > 4 || len < 2 + n)
            return 0;
        for (l = 0; n > 0; n--)
            l = l << 8 | der[h++];
    }
    return l <= len - h ? h + l : 0;
}

static void
raw(const uint8_t *der, size_t len)
{
    const uint8_t *ips[MAX_ASKS + 1];
    size_t iplens[MAX_ASKS + 1], n = 0;

    for (size_t i = 0; i + 2 <= len && n < MAX_ASKS; i++)
        if (der[i] == 0x87 && (der[i + 1] == 4 || der[i + 1] == 16) &&
            (size_t)der[i + 1] <= len - i - 2)
            ips[n] = der + i + 2, iplens[n++] = der[i + 1];
    ips[n] = other_ip, iplens[n++] = sizeof(other_ip);

    size_t end = outer_end(der, len);
    for (size_t k = 0; k < n; k++) {
        int r = ask(der, len, ips[k], iplens[k]);
        if (r)
            CHECK(has_tlv(der, len, ips[k], iplens[k]));
        if (end == 0) {
            CHECK(r == 0);
            continue;
        }
        if (k > 0)
            continue; /* the cuts once per input: they cost a copy each */
        CHECK(ask(der, end, ips[k], iplens[k]) == r);
        CHECK(ask(der, end - 1, ips[k], iplens[k]) == 0);
        CHECK(ask(der, end / 2, ips[k], iplens[k]) == 0);
    }
}

/* ---- certificates written here ---------------------------------------- */

struct out {
    uint8_t b[CERT_MAX];
    size_t len;
    int long_form; /* 0x81/0x82 lengths even where one byte would do */
};

/* Turns the |o->len - from| bytes at |from| into the value of a TLV with
 * |tag|: the header is slid in front of them. 0, or -1 when it is full. */
static int
wrap(struct out *o, size_t from, uint8_t tag)
{
    size_t v = o->len - from;
    uint8_t h[6];
    size_t hl = 0;

    h[hl++] = tag;
    if (v < 0x80 && !o->long_form) {
        h[hl++] = (uint8_t)v;
    } else if (v < 0x100) {
        h[hl++] = 0x81;
        h[hl++] = (uint8_t)v;
    } else {
        h[hl++] = 0x82;
        h[hl++] = (uint8_t)(v >> 8);
        h[hl++] = (uint8_t)v;
    }
    if (v > 0xffff || sizeof(o->b) - o->len < hl)
        return -1;
    memmove(o->b + from + hl, o->b + from, v);
    memcpy(o->b + from, h, hl);
    o->len += hl;
    return 0;
}

static int
put(struct out *o, const void *p, size_t n)
{
    if (sizeof(o->b) - o->len < n)
        return -1;
    memcpy(o->b + o->len, p, n);
    o->len += n;
    return 0;
}

static int
put_tlv(struct out *o, uint8_t tag, const void *p, size_t n)
{
    size_t from = o->len;
    return put(o, p, n) == 0 && wrap(o, from, tag) == 0 ? 0 : -1;
}

/* [flags][ip byte][names: [tag][len][value]...]. A length byte with bit 7
 * set stands for the address asked for (the value is not in the input). */
enum {
    F_CRITICAL = 1,
    F_EXT_BEFORE = 2,
    F_FIELD_BEFORE = 4,
    F_LONG = 8,
    F_V6 = 16,
    F_TRAILING = 32,
    F_ASK_OTHER = 64, /* also ask for other_ip, which only the input can list */
};

static struct out o;

static void
build(const uint8_t *p, size_t n)
{
    static const uint8_t san_oid[] = {0x55, 0x1d, 0x11}, bc_oid[] = {0x55, 0x1d, 0x13};
    static const uint8_t ver[] = {0x02, 0x01, 0x02}, crit[] = {0xff};
    static const uint8_t alg[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02};
    uint8_t ip[16] = {0x20, 0x01, 0x0d, 0xb8}, ip4[4] = {192, 0, 2};
    size_t iplen;
    int want = 0, want_other = 0;

    if (n < 2)
        return;
    unsigned flags = p[0];
    o.len = 0;
    o.long_form = (flags & F_LONG) != 0;
    if (flags & F_V6) {
        ip[15] = p[1];
        iplen = 16;
    } else {
        memcpy(ip, ip4, 3);
        ip[3] = p[1];
        iplen = 4;
    }
    p += 2, n -= 2;

    /* Certificate { TBSCertificate { [0] version, serial, [field], [3] {
     * Extensions { [basicConstraints], SAN } } }, algorithm, signature } */
    size_t cert = o.len, tbs = o.len;
    if (put_tlv(&o, 0xa0, ver, sizeof(ver)) || put_tlv(&o, 0x02, "\x01", 1))
        return;
    if ((flags & F_FIELD_BEFORE) && put_tlv(&o, 0x30, alg, sizeof(alg)))
        return;
    size_t exts = o.len, seq = o.len;
    if (flags & F_EXT_BEFORE) {
        size_t e = o.len;
        if (put_tlv(&o, 0x06, bc_oid, sizeof(bc_oid)) || put_tlv(&o, 0x04, "\x30\x00", 2) ||
            wrap(&o, e, 0x30))
            return;
    }
    size_t ext = o.len;
    if (put_tlv(&o, 0x06, san_oid, sizeof(san_oid)))
        return;
    if ((flags & F_CRITICAL) && put_tlv(&o, 0x01, crit, sizeof(crit)))
        return;
    size_t octets = o.len, names = o.len;
    while (n >= 2) {
        uint8_t tag = p[0], l = p[1];
        const uint8_t *v = p + 2;
        size_t vl;
        if ((tag & 0x1f) == 0x1f) /* high tag numbers are not walked */
            tag ^= 1;
        if (l & 0x80) {
            v = ip, vl = iplen;
            p += 2, n -= 2;
        } else {
            vl = l < n - 2 ? l : n - 2;
            p += 2 + vl, n -= 2 + vl;
        }
        if (put_tlv(&o, tag, v, vl))
            return;
        if (tag == 0x87 && vl == iplen && memcmp(v, ip, iplen) == 0)
            want = 1;
        if (tag == 0x87 && vl == sizeof(other_ip) && memcmp(v, other_ip, vl) == 0)
            want_other = 1;
    }
    if (wrap(&o, names, 0x30) || wrap(&o, octets, 0x04) || wrap(&o, ext, 0x30) ||
        wrap(&o, seq, 0x30) || wrap(&o, exts, 0xa3) || wrap(&o, tbs, 0x30) ||
        put_tlv(&o, 0x30, alg, sizeof(alg)) || put_tlv(&o, 0x03, "\x00", 1) ||
        wrap(&o, cert, 0x30))
        return;
    size_t len = o.len;
    /* Bytes after the certificate are never read: not even the address. */
    if ((flags & F_TRAILING) && put_tlv(&o, 0x87, ip, iplen) != 0)
        return;
    CHECK(ask(o.b, o.len, ip, iplen) == want);
    if (flags & F_ASK_OTHER)
        CHECK(ask(o.b, o.len, other_ip, sizeof(other_ip)) == want_other);
    CHECK(ask(o.b, len - 1, ip, iplen) == 0);
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
