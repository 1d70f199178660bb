/* Message body framing (RFC 9112 §6-7). It only finds where a body ends, so
 * a proxy can forward the bytes untouched; nothing is decoded or copied.
 *
 * The framing rules lean strict on purpose: a proxy and the server behind it
 * must agree on every message boundary, and each leniency here (Content-Length
 * next to Transfer-Encoding, a bare LF in chunk framing, a folded trailer) is
 * a boundary some other implementation draws elsewhere. */

#include <string.h>

#include "http/http.h"
#include "http/http_int.h"

#define CHUNK_LINE_MAX 4096 /* chunk-size line or trailer line, CRLF excluded */

/* Chunked parser states, kept in body->state. */
enum {
    CH_SIZE,       /* hex digits of chunk-size; body->remaining accumulates */
    CH_SIZE_WS,    /* BWS after the size: only ';' may follow */
    CH_EXT,        /* chunk extensions, up to CR */
    CH_SIZE_LF,    /* LF ending the chunk-size line */
    CH_DATA,       /* body->remaining bytes of chunk data */
    CH_DATA_CR,    /* CRLF after the chunk data */
    CH_DATA_LF,
    CH_TRAILER,    /* start of a trailer line, or the final CRLF */
    CH_TRAILER_NAME,
    CH_TRAILER_VALUE,
    CH_TRAILER_LF,
    CH_END_LF,     /* LF of the final CRLF */
    CH_ERROR,      /* sticky: the stream is unframeable from here on */
};

/* HT, SP, VCHAR and obs-text: what may sit in extensions and field values. */
static int
is_text(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int
hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static struct mem_slice
trim(const char *a, const char *b)
{
    while (a < b && (*a == ' ' || *a == '\t'))
        a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
        b--;
    return mem_slice(a, (size_t)(b - a));
}

/* Walks the comma-separated elements of every header called |name|, calling
 * |fn| on each trimmed element. Stops at the first non-zero return. */
static int
each_element(const struct http_header *h, size_t n, const char *name,
             int (*fn)(struct mem_slice elem, void *arg), void *arg)
{
    size_t i;
    int rc;

    for (i = 0; i < n; i++) {
        const char *p, *end, *comma;

        if (!mem_slice_ieq(h[i].name, name))
            continue;
        p = h[i].value.ptr;
        end = p + h[i].value.len;
        do {
            comma = p < end ? memchr(p, ',', (size_t)(end - p)) : NULL;
            if ((rc = fn(trim(p, comma ? comma : end), arg)) != 0)
                return rc;
            p = comma ? comma + 1 : end;
        } while (comma);
    }
    return 0;
}

struct te_scan {
    int present;
    int chunked_last;
};

/* RFC 9112 §6.1: chunked is applied once and last. Anything after it, an
 * empty element, or a parameter on chunked is refused rather than guessed. */
static int
te_element(struct mem_slice e, void *arg)
{
    struct te_scan *te = arg;
    const char *semi = memchr(e.ptr, ';', e.len);
    struct mem_slice name = trim(e.ptr, semi ? semi : e.ptr + e.len);
    size_t i;

    if (name.len == 0 || te->chunked_last)
        return HTTP_ERR_BAD;
    for (i = 0; i < name.len; i++)
        if (!http_is_tchar((unsigned char)name.ptr[i]))
            return HTTP_ERR_BAD;
    te->present = 1;
    te->chunked_last = mem_slice_ieq(name, "chunked");
    if (te->chunked_last && semi)
        return HTTP_ERR_BAD;
    return 0;
}

struct cl_scan {
    int present;
    uint64_t value;
};

/* RFC 9110 §8.6: a list of identical values ("5, 5") may be taken as one;
 * differing values, signs, spaces inside and overflow are refused. */
static int
cl_element(struct mem_slice e, void *arg)
{
    struct cl_scan *cl = arg;
    uint64_t v = 0;
    size_t i;

    if (e.len == 0)
        return HTTP_ERR_BAD;
    for (i = 0; i < e.len; i++) {
        unsigned d = (unsigned char)e.ptr[i] - '0';
        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return HTTP_ERR_BAD;
        v = v * 10 + d;
    }
    if (cl->present && cl->value != v)
        return HTTP_ERR_BAD;
    cl->present = 1;
    cl->value = v;
    return 0;
}

static void
body_set(struct http_body *body, enum http_body_kind kind, uint64_t length)
{
    memset(body, 0, sizeof(*body));
    body->kind = kind;
    body->state = CH_SIZE;
    if (kind == HTTP_BODY_LENGTH)
        body->remaining = length;
    body->done = kind == HTTP_BODY_NONE || (kind == HTTP_BODY_LENGTH && length == 0);
}

/* Shared by requests and responses; they differ only in what a message with
 * no usable framing means (RFC 9112 §6.3 rules 4-8). */
static int
framing(struct http_body *body, const struct http_header *h, size_t n, int response)
{
    struct te_scan te = {0, 0};
    struct cl_scan cl = {0, 0};

    if (each_element(h, n, "transfer-encoding", te_element, &te) != 0)
        return HTTP_ERR_BAD;
    if (each_element(h, n, "content-length", cl_element, &cl) != 0)
        return HTTP_ERR_BAD;
    /* RFC 9112 §6.3 lets TE override CL, but also calls the pair a likely
     * smuggling attempt; since we forward heads as received, the next hop
     * would see both, so refuse in either direction. */
    if (te.present && cl.present)
        return HTTP_ERR_BAD;
    if (te.present && te.chunked_last)
        body_set(body, HTTP_BODY_CHUNKED, 0);
    else if (te.present && !response)
        return HTTP_ERR_BAD;
    else if (te.present)
        body_set(body, HTTP_BODY_CLOSE, 0);
    else if (cl.present)
        body_set(body, HTTP_BODY_LENGTH, cl.value);
    else
        body_set(body, response ? HTTP_BODY_CLOSE : HTTP_BODY_NONE, 0);
    return 0;
}

int
http_body_init_request(struct http_body *body, const struct http_request *req)
{
    return framing(body, req->headers, req->num_headers, 0);
}

int
http_body_init_response(struct http_body *body, const struct http_response *res,
                        struct mem_slice method)
{
    int s = res->status;

    /* RFC 9112 §6.3 rules 1-2: these never have a body, whatever the
     * headers claim, so their framing headers are not even checked. */
    if (mem_slice_eq(method, MEM_SLICE_LIT("HEAD")) || (s >= 100 && s < 200) || s == 204 ||
        s == 304 || (mem_slice_eq(method, MEM_SLICE_LIT("CONNECT")) && s >= 200 && s < 300)) {
        body_set(body, HTTP_BODY_NONE, 0);
        return 0;
    }
    return framing(body, res->headers, res->num_headers, 1);
}

static ssize_t
chunk_fail(struct http_body *body)
{
    body->state = CH_ERROR;
    return HTTP_ERR_BAD;
}

/* One byte of a chunk-size line or trailer line: counts it against the
 * line bound, so a peer cannot make us scan an endless line. */
static int
line_grow(struct http_body *body)
{
    return ++body->line_len <= CHUNK_LINE_MAX;
}

static ssize_t
feed_chunked(struct http_body *body, const char *buf, size_t len)
{
    size_t i = 0;

    while (i < len) {
        unsigned char c = (unsigned char)buf[i];
        int d;

        switch (body->state) {
        case CH_SIZE:
            if ((d = hex_value(c)) >= 0) {
                if (body->remaining > UINT64_MAX >> 4 || !line_grow(body))
                    return chunk_fail(body);
                body->remaining = body->remaining << 4 | (uint64_t)d;
                break;
            }
            if (body->line_len == 0)
                return chunk_fail(body);
            if (c == '\r')
                body->state = CH_SIZE_LF;
            else if (c == ';')
                body->state = CH_EXT;
            else if (c == ' ' || c == '\t')
                body->state = CH_SIZE_WS;
            else
                return chunk_fail(body);
            if (c != '\r' && !line_grow(body))
                return chunk_fail(body);
            break;
        case CH_SIZE_WS:
            if (c == ';')
                body->state = CH_EXT;
            else if (c != ' ' && c != '\t')
                return chunk_fail(body);
            if (!line_grow(body))
                return chunk_fail(body);
            break;
        case CH_EXT:
            /* Extensions are forwarded, not interpreted: only the line
             * end matters, and no CTL may blur where it is. */
            if (c == '\r')
                body->state = CH_SIZE_LF;
            else if (!is_text(c) || !line_grow(body))
                return chunk_fail(body);
            break;
        case CH_SIZE_LF:
            if (c != '\n')
                return chunk_fail(body);
            body->line_len = 0;
            body->state = body->remaining ? CH_DATA : CH_TRAILER;
            break;
        case CH_DATA: {
            size_t take = len - i;

            if (take > body->remaining)
                take = (size_t)body->remaining;
            body->remaining -= take;
            i += take;
            if (body->remaining == 0)
                body->state = CH_DATA_CR;
            continue;
        }
        case CH_DATA_CR:
            if (c != '\r')
                return chunk_fail(body);
            body->state = CH_DATA_LF;
            break;
        case CH_DATA_LF:
            if (c != '\n')
                return chunk_fail(body);
            body->state = CH_SIZE;
            break;
        case CH_TRAILER:
            /* A leading SP/HT would be obs-fold: refused as in heads. */
            if (c == '\r')
                body->state = CH_END_LF;
            else if (http_is_tchar(c) && line_grow(body))
                body->state = CH_TRAILER_NAME;
            else
                return chunk_fail(body);
            break;
        case CH_TRAILER_NAME:
            if (c == ':')
                body->state = CH_TRAILER_VALUE;
            else if (!http_is_tchar(c))
                return chunk_fail(body);
            if (!line_grow(body))
                return chunk_fail(body);
            break;
        case CH_TRAILER_VALUE:
            if (c == '\r')
                body->state = CH_TRAILER_LF;
            else if (!is_text(c) || !line_grow(body))
                return chunk_fail(body);
            break;
        case CH_TRAILER_LF:
            if (c != '\n')
                return chunk_fail(body);
            body->line_len = 0;
            body->state = CH_TRAILER;
            break;
        case CH_END_LF:
            if (c != '\n')
                return chunk_fail(body);
            body->done = 1;
            return (ssize_t)(i + 1);
        default:
            return chunk_fail(body);
        }
        i++;
    }
    return (ssize_t)i;
}

ssize_t
http_body_feed(struct http_body *body, const char *buf, size_t len)
{
    size_t take;

    if (body->kind == HTTP_BODY_CHUNKED && body->state == CH_ERROR)
        return HTTP_ERR_BAD;
    if (body->done)
        return 0;
    switch (body->kind) {
    case HTTP_BODY_LENGTH:
        take = len < body->remaining ? len : (size_t)body->remaining;
        body->remaining -= take;
        body->done = body->remaining == 0;
        return (ssize_t)take;
    case HTTP_BODY_CHUNKED:
        return feed_chunked(body, buf, len);
    case HTTP_BODY_CLOSE:
        return (ssize_t)len;
    default:
        body->done = 1;
        return 0;
    }
}

ssize_t
http_body_next_data(struct http_body *body, const char *buf, size_t len, size_t *data_off,
                    size_t *data_len)
{
    size_t used = 0;

    *data_off = *data_len = 0;
    if (body->kind != HTTP_BODY_CHUNKED) {
        ssize_t n = http_body_feed(body, buf, len);

        if (n > 0)
            *data_len = (size_t)n;
        return n;
    }
    while (used < len && !body->done) {
        if (body->state == CH_DATA && body->remaining > 0) {
            size_t n = len - used < body->remaining ? len - used : (size_t)body->remaining;
            ssize_t k = feed_chunked(body, buf + used, n);

            if (k < 0)
                return k;
            *data_off = used;
            *data_len = (size_t)k;
            return (ssize_t)(used + (size_t)k);
        }
        /* Framing: a byte at a time, so the data that follows is found
         * where it starts (size lines are a few bytes). */
        ssize_t k = feed_chunked(body, buf + used, 1);

        if (k < 0)
            return k;
        if (k == 0)
            break;
        used += (size_t)k;
    }
    return (ssize_t)used;
}

ssize_t
http_body_dechunk(const char *raw, size_t n, char *out)
{
    size_t i = 0, o = 0;

    for (;;) {
        uint64_t size = 0;
        int digits = 0;

        for (; i < n; i++, digits++) {
            char c = raw[i];
            int v = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
            if (v < 0)
                break;
            if (size > (UINT64_MAX >> 4))
                return HTTP_ERR_BAD;
            size = size << 4 | (uint64_t)v;
        }
        if (digits == 0)
            return HTTP_ERR_BAD;
        const char *lf = memchr(raw + i, '\n', n - i); /* extensions end at the line's end */
        if (lf == NULL)
            return HTTP_ERR_BAD;
        i = (size_t)(lf - raw) + 1;
        if (size == 0)
            return (ssize_t)o; /* trailers follow: dropped */
        if (size > n - i)
            return HTTP_ERR_BAD;
        memmove(out + o, raw + i, size);
        o += size;
        i += size;
        if (i < n && raw[i] == '\r')
            i++;
        if (i >= n || raw[i] != '\n')
            return HTTP_ERR_BAD;
        i++;
    }
}
