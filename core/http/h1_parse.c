/* HTTP/1.x head parser (RFC 9112 §2-5). It is stateless: every call scans the
 * caller's bytes from the start, left to right, and decides each error at the
 * first byte that proves it. A prefix of a message therefore gives either
 * HTTP_ERR_INCOMPLETE or the very answer the whole message gives, which is
 * what lets a caller retry after each read without keeping parser state. */

#include <string.h>

#include "http/http.h"
#include "http/http_int.h"

struct scan {
    const char *buf;
    size_t end; /* bytes we look at: the caller's, capped at HTTP_MAX_HEAD */
    size_t len; /* bytes the caller has */
    size_t pos;
};

static int
is_ctl(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

/* Out of bytes: wait for more, unless the window already spans
 * HTTP_MAX_HEAD, in which case no ending can make the head acceptable. */
static int
starved(const struct scan *s)
{
    return s->len > s->end ? HTTP_ERR_TOO_LARGE : HTTP_ERR_INCOMPLETE;
}

/* Consumes CRLF or a bare LF (RFC 9112 §2.2 lets a recipient accept it).
 * A CR followed by anything else is refused: some peers end lines at a lone
 * CR and others do not, which is how heads get split differently. */
static int
take_eol(struct scan *s)
{
    if (s->pos >= s->end)
        return starved(s);
    if (s->buf[s->pos] == '\n') {
        s->pos++;
        return 0;
    }
    if (s->buf[s->pos] != '\r')
        return HTTP_ERR_BAD;
    if (s->pos + 1 >= s->end)
        return starved(s);
    if (s->buf[s->pos + 1] != '\n')
        return HTTP_ERR_BAD;
    s->pos += 2;
    return 0;
}

/* Reads a non-empty token and the |stop| byte after it. For header names
 * this also refuses whitespace before the colon (RFC 9112 §5.1). */
static int
take_token(struct scan *s, char stop, struct mem_slice *out)
{
    size_t start = s->pos;

    for (; s->pos < s->end; s->pos++) {
        unsigned char c = s->buf[s->pos];
        if (c == (unsigned char)stop) {
            if (s->pos == start)
                return HTTP_ERR_BAD;
            *out = mem_slice(s->buf + start, s->pos - start);
            s->pos++;
            return 0;
        }
        if (!http_is_tchar(c))
            return HTTP_ERR_BAD;
    }
    return starved(s);
}

/* The target runs to the next SP. Bytes from 0x80 up are let through, since
 * clients do send raw UTF-8 paths and they delimit nothing; control bytes
 * (HT, CR, LF, NUL...) are not, so "GET /\r\n" (HTTP/0.9) is refused too. */
static int
take_target(struct scan *s, struct mem_slice *out)
{
    size_t start = s->pos;

    for (; s->pos < s->end; s->pos++) {
        unsigned char c = s->buf[s->pos];
        if (c == ' ') {
            if (s->pos == start)
                return HTTP_ERR_BAD;
            *out = mem_slice(s->buf + start, s->pos - start);
            s->pos++;
            return 0;
        }
        if (is_ctl(c))
            return HTTP_ERR_BAD;
    }
    return starved(s);
}

/* Only HTTP/1.0 and HTTP/1.1, case-sensitive (RFC 9112 §2.3). Compared a
 * byte at a time so that a prefix such as "HTT" waits instead of failing. */
static int
take_version(struct scan *s, int *minor)
{
    static const char prefix[] = "HTTP/1.";
    size_t k;
    char c;

    for (k = 0; k < sizeof(prefix) - 1; k++, s->pos++) {
        if (s->pos >= s->end)
            return starved(s);
        if (s->buf[s->pos] != prefix[k])
            return HTTP_ERR_BAD;
    }
    if (s->pos >= s->end)
        return starved(s);
    c = s->buf[s->pos];
    if (c != '0' && c != '1')
        return HTTP_ERR_BAD;
    *minor = c - '0';
    s->pos++;
    return 0;
}

/* Reads text up to the end of the line and the line end itself. |trim|
 * drops surrounding SP/HT (field values); the reason phrase keeps them. */
static int
take_text(struct scan *s, int trim, struct mem_slice *out)
{
    size_t start, stop;
    int rc;

    if (trim)
        while (s->pos < s->end && (s->buf[s->pos] == ' ' || s->buf[s->pos] == '\t'))
            s->pos++;
    start = stop = s->pos;
    for (; s->pos < s->end; s->pos++) {
        unsigned char c = s->buf[s->pos];
        if (c == '\r' || c == '\n') {
            if (!trim)
                stop = s->pos;
            if ((rc = take_eol(s)) != 0)
                return rc;
            *out = mem_slice(s->buf + start, stop - start);
            return 0;
        }
        if (is_ctl(c) && c != '\t')
            return HTTP_ERR_BAD;
        if (c != ' ' && c != '\t')
            stop = s->pos + 1;
    }
    return starved(s);
}

/* Field lines up to and including the empty line. A line that starts with
 * SP or HT is obs-fold, or whitespace before the first field; RFC 9112 lets
 * us reject both, and unfolding differently from a peer is a smuggling
 * vector, so we do. */
static int
take_headers(struct scan *s, struct http_header *h, size_t *n)
{
    int rc;

    *n = 0;
    for (;;) {
        unsigned char c;

        if (s->pos >= s->end)
            return starved(s);
        c = s->buf[s->pos];
        if (c == '\r' || c == '\n')
            return take_eol(s);
        if (c == ' ' || c == '\t')
            return HTTP_ERR_BAD;
        if (*n == HTTP_MAX_HEADERS)
            return HTTP_ERR_TOO_LARGE;
        if ((rc = take_token(s, ':', &h[*n].name)) != 0)
            return rc;
        if ((rc = take_text(s, 1, &h[*n].value)) != 0)
            return rc;
        (*n)++;
    }
}

static struct scan
scan_start(const char *buf, size_t len)
{
    struct scan s = {buf, len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD, len, 0};
    return s;
}

int
http_h1_parse_request(const char *buf, size_t len, struct http_request *req)
{
    struct scan s = scan_start(buf, len);
    struct mem_slice method, target;
    struct http_header h[HTTP_MAX_HEADERS];
    size_t n;
    int minor, rc;

    /* RFC 9112 §2.2: ignore empty lines before the request-line, as left by
     * clients that end a POST body with an extra CRLF. */
    while (s.pos < s.end && (buf[s.pos] == '\r' || buf[s.pos] == '\n'))
        if ((rc = take_eol(&s)) != 0)
            return rc;
    if ((rc = take_token(&s, ' ', &method)) != 0)
        return rc;
    if ((rc = take_target(&s, &target)) != 0)
        return rc;
    if ((rc = take_version(&s, &minor)) != 0)
        return rc;
    if ((rc = take_eol(&s)) != 0)
        return rc;
    if ((rc = take_headers(&s, h, &n)) != 0)
        return rc;

    /* Parsed into locals so that |req| is untouched on every error. */
    req->method = method;
    req->target = target;
    req->minor_version = minor;
    req->num_headers = n;
    memcpy(req->headers, h, n * sizeof(h[0]));
    return (int)s.pos;
}

/* Three digits, the first not 0 (RFC 9110 §15: 100..999 are all valid). */
static int
take_status(struct scan *s, int *status)
{
    int k, v = 0;

    for (k = 0; k < 3; k++, s->pos++) {
        char c;

        if (s->pos >= s->end)
            return starved(s);
        c = s->buf[s->pos];
        if (c < '0' || c > '9' || (k == 0 && c == '0'))
            return HTTP_ERR_BAD;
        v = v * 10 + (c - '0');
    }
    *status = v;
    return 0;
}

int
http_h1_parse_response(const char *buf, size_t len, struct http_response *res)
{
    struct scan s = scan_start(buf, len);
    struct mem_slice reason;
    struct http_header h[HTTP_MAX_HEADERS];
    size_t n;
    int minor, status, rc;

    if ((rc = take_version(&s, &minor)) != 0)
        return rc;
    if (s.pos >= s.end)
        return starved(&s);
    if (buf[s.pos++] != ' ')
        return HTTP_ERR_BAD;
    if ((rc = take_status(&s, &status)) != 0)
        return rc;
    if (s.pos >= s.end)
        return starved(&s);
    /* The SP before an empty reason is required, but enough servers send
     * "HTTP/1.1 200\r\n" that we take the line end straight away too. */
    if (buf[s.pos] == ' ') {
        s.pos++;
        if ((rc = take_text(&s, 0, &reason)) != 0)
            return rc;
    } else {
        reason = mem_slice(buf + s.pos, 0);
        if ((rc = take_eol(&s)) != 0)
            return rc;
    }
    if ((rc = take_headers(&s, h, &n)) != 0)
        return rc;

    res->status = status;
    res->minor_version = minor;
    res->reason = reason;
    res->num_headers = n;
    memcpy(res->headers, h, n * sizeof(h[0]));
    return (int)s.pos;
}

const struct http_header *
http_header_find(const struct http_header *h, size_t n, const char *name)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (mem_slice_ieq(h[i].name, name))
            return &h[i];
    return NULL;
}

/* Connection is a comma-separated list and may be repeated (RFC 9110 §7.6.1);
 * elements are compared whole, so "upgraded" does not match "upgrade". */
int
http_connection_lists(const struct http_header *h, size_t n, struct mem_slice token)
{
    size_t i;

    for (i = 0; i < n; i++) {
        const char *p, *end;

        if (!mem_slice_ieq(h[i].name, "connection") || h[i].value.len == 0)
            continue;
        p = h[i].value.ptr;
        end = p + h[i].value.len;
        while (p < end) {
            const char *comma = memchr(p, ',', (size_t)(end - p));
            const char *stop = comma ? comma : end;
            const char *a = p, *b = stop;

            while (a < b && (*a == ' ' || *a == '\t'))
                a++;
            while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
                b--;
            if ((size_t)(b - a) == token.len && strncasecmp(a, token.ptr, token.len) == 0)
                return 1;
            p = comma ? comma + 1 : end;
        }
    }
    return 0;
}

int
http_connection_has(const struct http_header *h, size_t n, const char *token)
{
    return http_connection_lists(h, n, mem_slice(token, strlen(token)));
}
