#include <string.h>

#include "flow/sniff.h"

/* The ClientHello is parsed again from the first byte on every call: the
 * contract keeps no state between calls, and re-reading one hello per read
 * is cheaper than a state machine that must be right at every cut.
 * Helpers return 1 (done), FLOW_SNIFF_NEED_MORE (0) or FLOW_SNIFF_NONE (-1).
 * Every NONE follows from bytes already seen, so more bytes never turn it
 * into a name. */

#define RECORD_MAX 16384 /* RFC 8446 §5.1: plaintext fragments up to 2^14 */
#define HELLO_MAX 16384  /* ClientHello body; real ones take a few hundred bytes to 2 KiB */
#define HELLO_MIN 41     /* version, random, empty session_id, one suite, one method */
#define NAME_MAX_LEN 253

#define TRY(x)                                                                                 \
    do {                                                                                       \
        int r_ = (x);                                                                          \
        if (r_ <= 0)                                                                           \
            return r_;                                                                         \
    } while (0)

/* The handshake byte stream as it runs through consecutive records, read
 * in place: a hello split across records is never copied. Offsets |off| and
 * the |end|s below count handshake bytes, not raw bytes. */
struct hs {
    const unsigned char *p;
    size_t len;  /* raw bytes available */
    size_t raw;  /* raw offset of the next handshake byte */
    size_t room; /* handshake bytes left in the current record */
    size_t off;  /* handshake bytes consumed */
};

struct hello {
    char *out;
    size_t outlen;
    size_t name_len; /* 0 until a host_name was taken */
    int seen_sni, seen_alpn, h2;
};

/* Checks the record header at h->raw byte by byte, so that a flow that is
 * not TLS is refused on its first byte and a cut header is still a prefix. */
static int
record(struct hs *h)
{
    const unsigned char *r = h->p + h->raw;
    size_t have = h->len - h->raw;

    if (have > 0 && r[0] != 22)
        return FLOW_SNIFF_NONE;
    if (have > 1 && r[1] != 3)
        return FLOW_SNIFF_NONE;
    if (have > 2 && (r[2] < 1 || r[2] > 4))
        return FLOW_SNIFF_NONE;
    if (have > 3 && r[3] > RECORD_MAX >> 8)
        return FLOW_SNIFF_NONE;
    if (have < 5)
        return FLOW_SNIFF_NEED_MORE;
    h->room = (size_t)r[3] << 8 | r[4];
    /* Zero-length handshake fragments are forbidden (RFC 8446 §5.1); they
     * would also let a peer stretch the input without bound. */
    if (h->room == 0 || h->room > RECORD_MAX)
        return FLOW_SNIFF_NONE;
    h->raw += 5;
    return 1;
}

/* Takes |n| handshake bytes into |dst| (NULL skips them). On NEED_MORE the
 * bytes taken so far are already in |dst| and counted in h->off. */
static int
take(struct hs *h, size_t n, unsigned char *dst)
{
    while (n > 0) {
        size_t k;

        if (h->room == 0)
            TRY(record(h));
        k = h->len - h->raw;
        if (k == 0)
            return FLOW_SNIFF_NEED_MORE;
        if (k > h->room)
            k = h->room;
        if (k > n)
            k = n;
        if (dst != NULL) {
            memcpy(dst, h->p + h->raw, k);
            dst += k;
        }
        h->raw += k;
        h->room -= k;
        h->off += k;
        n -= k;
    }
    return 1;
}

/* Reads a big-endian integer of |w| bytes that must end by |end|. */
static int
uint_at(struct hs *h, size_t w, size_t end, size_t *v)
{
    unsigned char b[3];
    size_t i;

    if (end - h->off < w)
        return FLOW_SNIFF_NONE;
    TRY(take(h, w, b));
    for (*v = 0, i = 0; i < w; i++)
        *v = *v << 8 | b[i];
    return 1;
}

/* Reads a |w|-byte length prefix and returns where the vector ends; a
 * vector that overruns its container is refused before its bytes arrive. */
static int
vec(struct hs *h, size_t w, size_t end, size_t *vend)
{
    size_t n;

    TRY(uint_at(h, w, end, &n));
    if (n > end - h->off)
        return FLOW_SNIFF_NONE;
    *vend = h->off + n;
    return 1;
}

static int
name_ok(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_'))
            return 0;
    }
    return 1;
}

/* RFC 6066 §3: a list of (name_type, name); the first host_name (type 0)
 * wins. No other type was ever defined; one is skipped as the opaque
 * <1..2^16-1> that RFC 3546 gave every type. */
static int
server_name(struct hs *h, size_t end, struct hello *hl)
{
    size_t lend, type, n, start;
    int r;

    TRY(vec(h, 2, end, &lend));
    if (lend != end || lend == h->off)
        return FLOW_SNIFF_NONE;
    while (h->off < lend) {
        TRY(uint_at(h, 1, lend, &type));
        TRY(vec(h, 2, lend, &n));
        n -= h->off;
        if (n == 0)
            return FLOW_SNIFF_NONE;
        if (type != 0 || hl->name_len > 0) {
            TRY(take(h, n, NULL));
            continue;
        }
        if (n > NAME_MAX_LEN || n >= hl->outlen)
            return FLOW_SNIFF_NONE;
        start = h->off;
        r = take(h, n, (unsigned char *)hl->out);
        if (!name_ok(hl->out, h->off - start))
            return FLOW_SNIFF_NONE;
        if (r <= 0)
            return r;
        hl->name_len = n;
    }
    return 1;
}

/* RFC 7301 §3.1: ProtocolName protocol_name_list<2..2^16-1>, each name
 * opaque<1..2^8-1>. */
static int
alpn(struct hs *h, size_t end, struct hello *hl)
{
    size_t lend, n;
    unsigned char b[2];

    TRY(vec(h, 2, end, &lend));
    if (lend != end || lend == h->off)
        return FLOW_SNIFF_NONE;
    while (h->off < lend) {
        TRY(vec(h, 1, lend, &n));
        n -= h->off;
        if (n == 0)
            return FLOW_SNIFF_NONE;
        if (n != 2) {
            TRY(take(h, n, NULL));
            continue;
        }
        TRY(take(h, 2, b));
        if (b[0] == 'h' && b[1] == '2')
            hl->h2 = 1;
    }
    return 1;
}

static int
extensions(struct hs *h, size_t end, struct hello *hl)
{
    size_t type, eend;

    while (h->off < end) {
        TRY(uint_at(h, 2, end, &type));
        TRY(vec(h, 2, end, &eend));
        /* RFC 8446 §4.2: one extension of a type at most; a second SNI
         * could make us route by a name the server does not use. */
        if (type == 0) {
            if (hl->seen_sni++)
                return FLOW_SNIFF_NONE;
            TRY(server_name(h, eend, hl));
        } else if (type == 16) {
            if (hl->seen_alpn++)
                return FLOW_SNIFF_NONE;
            TRY(alpn(h, eend, hl));
        } else {
            TRY(take(h, eend - h->off, NULL));
        }
    }
    return 1;
}

/* RFC 8446 §4.1.2 / RFC 5246 §7.4.1.2, every length checked against the
 * message length first, so a lie is refused as soon as it is read. */
static int
client_hello(struct hs *h, struct hello *hl)
{
    size_t v, end, vend;

    TRY(uint_at(h, 1, 4, &v));
    if (v != 1)
        return FLOW_SNIFF_NONE;
    TRY(uint_at(h, 3, 4, &v));
    if (v < HELLO_MIN || v > HELLO_MAX)
        return FLOW_SNIFF_NONE;
    end = h->off + v;
    TRY(uint_at(h, 2, end, &v));
    if (v < 0x0301 || v > 0x0304)
        return FLOW_SNIFF_NONE;
    TRY(take(h, 32, NULL));
    TRY(vec(h, 1, end, &vend)); /* session_id<0..32> */
    if (vend - h->off > 32)
        return FLOW_SNIFF_NONE;
    TRY(take(h, vend - h->off, NULL));
    TRY(vec(h, 2, end, &vend)); /* cipher_suites<2..2^16-2> */
    if (vend == h->off || (vend - h->off) % 2 != 0)
        return FLOW_SNIFF_NONE;
    TRY(take(h, vend - h->off, NULL));
    TRY(vec(h, 1, end, &vend)); /* compression_methods<1..2^8-1> */
    if (vend == h->off)
        return FLOW_SNIFF_NONE;
    TRY(take(h, vend - h->off, NULL));
    if (h->off == end)
        return 1; /* no extensions, so no name */
    TRY(vec(h, 2, end, &vend));
    if (vend != end)
        return FLOW_SNIFF_NONE;
    return extensions(h, end, hl);
}

int
flow_sniff_tls(const unsigned char *p, size_t len, char *out, size_t outlen, int *alpn_h2)
{
    struct hs h = {.p = p, .len = len};
    struct hello hl = {.out = out, .outlen = outlen};
    int r;

    if (alpn_h2 != NULL)
        *alpn_h2 = 0;
    if (out == NULL || outlen == 0)
        return FLOW_SNIFF_NONE;
    r = client_hello(&h, &hl);
    if (r == 1 && alpn_h2 != NULL)
        *alpn_h2 = hl.h2;
    if (r == 1 && hl.name_len > 0) {
        for (size_t i = 0; i < hl.name_len; i++)
            if (out[i] >= 'A' && out[i] <= 'Z')
                out[i] = (char)(out[i] - 'A' + 'a');
        out[hl.name_len] = '\0';
        return (int)hl.name_len;
    }
    out[0] = '\0';
    return r == 1 ? FLOW_SNIFF_NONE : r;
}
