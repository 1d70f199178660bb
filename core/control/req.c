#include <string.h>
#include <strings.h>

#include "control/control_int.h"

/* Request targets and the secret: bytes from the network, parsed without
 * I/O (spec/fuzz/control_fuzz.c feeds them). */

static int
hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes |n| bytes into |out| (|len| bytes with the NUL); '+'
 * means a space in a query. -1 for a bad escape, a NUL, or no room. */
static int
decode(const char *p, size_t n, int plus, char *out, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (ch == '%') {
            if (i + 2 >= n)
                return -1;
            int hi = hexval(p[i + 1]);
            int lo = hexval(p[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            ch = (char)(hi << 4 | lo);
            i += 2;
        } else if (ch == '+' && plus) {
            ch = ' ';
        }
        if (ch == '\0' || o + 1 >= len)
            return -1;
        out[o++] = ch;
    }
    out[o] = '\0';
    return 0;
}

int
control_target_parse(struct mem_slice target, struct control_target *t)
{
    const char *p = target.ptr;
    size_t n = target.len;
    t->nsegs = 0;
    t->query = (struct mem_slice){NULL, 0};
    if (n == 0 || p[0] != '/')
        return -1;
    const char *q = memchr(p, '?', n);
    size_t plen = q != NULL ? (size_t)(q - p) : n;
    if (q != NULL)
        t->query = (struct mem_slice){q + 1, n - plen - 1};
    size_t i = 1;
    while (i < plen) {
        const char *s = p + i;
        const char *e = memchr(s, '/', plen - i);
        size_t sl = e != NULL ? (size_t)(e - s) : plen - i;
        if (sl > 0) { /* "//" and a trailing "/" add no segment */
            if (t->nsegs == CONTROL_MAX_SEGS ||
                decode(s, sl, 0, t->segs[t->nsegs], sizeof(t->segs[0])) != 0)
                return -1;
            t->nsegs++;
        }
        i += sl + 1;
    }
    return 0;
}

int
control_query_get(struct mem_slice query, const char *key, char *out, size_t len)
{
    size_t kl = strlen(key), i = 0;
    while (i < query.len) {
        const char *s = query.ptr + i;
        const char *e = memchr(s, '&', query.len - i);
        size_t pl = e != NULL ? (size_t)(e - s) : query.len - i;
        const char *eq = memchr(s, '=', pl);
        size_t nl = eq != NULL ? (size_t)(eq - s) : pl;
        if (nl == kl && memcmp(s, key, kl) == 0) {
            if (eq == NULL) {
                if (len == 0)
                    return -1;
                out[0] = '\0';
                return 1;
            }
            return decode(eq + 1, pl - nl - 1, 1, out, len) == 0 ? 1 : -1;
        }
        i += pl + 1;
    }
    return 0;
}

/* Equal in time that depends only on the lengths: the loop runs over the
 * secret's length whatever the guess, so timing tells nothing of where a
 * guess goes wrong. */
static int
ct_equal(const char *secret, size_t slen, const char *guess, size_t glen)
{
    unsigned char d = (unsigned char)(slen != glen);
    for (size_t i = 0; i < slen; i++)
        d |= (unsigned char)(secret[i] ^ (i < glen ? guess[i] : 0));
    return d == 0;
}

int
control_auth_ok(const char *secret, const struct http_request *req, struct mem_slice query)
{
    size_t slen = strlen(secret);
    if (slen == 0)
        return 1;
    const struct http_header *h = http_header_find(req->headers, req->num_headers, "authorization");
    if (h != NULL && h->value.len > 7 && strncasecmp(h->value.ptr, "Bearer ", 7) == 0) {
        const char *v = h->value.ptr + 7;
        size_t vl = h->value.len - 7;
        while (vl > 0 && *v == ' ')
            v++, vl--;
        if (ct_equal(secret, slen, v, vl))
            return 1;
    }
    char tok[256];
    if (control_query_get(query, "token", tok, sizeof(tok)) == 1 &&
        ct_equal(secret, slen, tok, strlen(tok)))
        return 1;
    return 0;
}
