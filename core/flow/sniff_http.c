#include <arpa/inet.h>
#include <string.h>

#include "flow/sniff.h"

/* Like the TLS sniffer, this re-reads the head from its first byte on every
 * call and answers NONE only from bytes already seen (or from the size cap),
 * so a NONE never turns into a name when more bytes arrive. The answer comes
 * as soon as the Host line ends: what follows it cannot change the name. */

#define HEAD_MAX 8192 /* the Host line must end within this many bytes */
#define NAME_MAX_LEN 253

/* PRI is left out on purpose: "PRI * HTTP/2.0" opens an HTTP/2 connection,
 * whose authority is in HEADERS frames this sniffer does not read. */
static const char *const methods[] = {
    "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE",
};

#define NMETHODS (sizeof(methods) / sizeof(methods[0]))

static int
method_known(const unsigned char *p, size_t n, int whole)
{
    size_t i;

    for (i = 0; i < NMETHODS; i++) {
        size_t k = strlen(methods[i]);

        if (whole ? k == n : k >= n)
            if (memcmp(p, methods[i], n) == 0)
                return 1;
    }
    return 0;
}

static int
tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c > ' ' && c < 0x7f && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* "METHOD SP target SP HTTP/1.x" then CRLF or a bare LF. Returns 1 with
 * the start of the next line in |*next|, or NEED_MORE / NONE. */
static int
request_line(const unsigned char *p, size_t n, size_t *next)
{
    static const char version[] = "HTTP/1.";
    size_t i = 0, t, k;

    while (i < n && i < 8 && p[i] >= 'A' && p[i] <= 'Z')
        i++;
    if (i == n)
        return method_known(p, n, 0) ? FLOW_SNIFF_NEED_MORE : FLOW_SNIFF_NONE;
    if (p[i] != ' ' || !method_known(p, i, 1))
        return FLOW_SNIFF_NONE;
    t = ++i;
    while (i < n && p[i] > ' ' && p[i] != 0x7f)
        i++;
    if (i == n)
        return FLOW_SNIFF_NEED_MORE;
    if (p[i] != ' ' || i == t)
        return FLOW_SNIFF_NONE;
    for (i++, k = 0; k < sizeof(version) - 1; i++, k++) {
        if (i == n)
            return FLOW_SNIFF_NEED_MORE;
        if (p[i] != (unsigned char)version[k])
            return FLOW_SNIFF_NONE;
    }
    if (i < n && (p[i] < '0' || p[i] > '9'))
        return FLOW_SNIFF_NONE;
    if (++i < n && p[i] == '\r')
        i++;
    if (i >= n)
        return FLOW_SNIFF_NEED_MORE;
    if (p[i] != '\n')
        return FLOW_SNIFF_NONE;
    *next = i + 1;
    return 1;
}

/* Finds the LF ending the field line that starts at |s|; a stray CR, a NUL
 * or the end of the data before it answer for the whole head. */
static int
line_end(const unsigned char *p, size_t n, size_t s, size_t *lf)
{
    size_t i;

    for (i = s; i < n; i++) {
        if (p[i] == '\n') {
            *lf = i;
            return 1;
        }
        if (p[i] == '\0' || (p[i] == '\r' && i + 1 < n && p[i + 1] != '\n'))
            return FLOW_SNIFF_NONE;
    }
    return FLOW_SNIFF_NEED_MORE;
}

/* A reg-name or IPv4 address in the set the TLS sniffer accepts; inside
 * brackets, the hex digits, colons and dots of an IPv6 address. */
static int
host_char(unsigned char c, int v6)
{
    if ((c >= '0' && c <= '9') || c == '.')
        return 1;
    if (v6)
        return c == ':' || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_';
}

/* Host = uri-host [ ":" port ] (RFC 9110 §7.2): trims, strips the port
 * and the brackets of an IPv6 literal, validates and lowercases. */
static int
host_value(const unsigned char *v, size_t n, char *out, size_t outlen)
{
    size_t a = 0, b, i;
    int v6;

    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r'))
        n--;
    while (a < n && (v[a] == ' ' || v[a] == '\t'))
        a++;
    v6 = a < n && v[a] == '[';
    if (v6) {
        for (b = ++a; b < n && v[b] != ']'; b++)
            ;
        if (b == n)
            return FLOW_SNIFF_NONE;
        i = b + 1;
    } else {
        for (b = a; b < n && v[b] != ':'; b++)
            ;
        i = b;
    }
    if (i < n && v[i++] != ':')
        return FLOW_SNIFF_NONE;
    for (; i < n; i++)
        if (v[i] < '0' || v[i] > '9')
            return FLOW_SNIFF_NONE;
    if (b == a || b - a > NAME_MAX_LEN || b - a >= outlen)
        return FLOW_SNIFF_NONE;
    for (i = a; i < b; i++) {
        if (!host_char(v[i], v6))
            return FLOW_SNIFF_NONE;
        out[i - a] = (char)(v[i] >= 'A' && v[i] <= 'Z' ? v[i] - 'A' + 'a' : v[i]);
    }
    out[b - a] = '\0';
    return (int)(b - a);
}

static int
head(const unsigned char *p, size_t n, char *out, size_t outlen)
{
    size_t s, i, lf;
    int r = request_line(p, n, &s);

    if (r <= 0)
        return r;
    for (;;) {
        if (s == n || (p[s] == '\r' && s + 1 == n))
            return FLOW_SNIFF_NEED_MORE;
        if (p[s] == '\n' || p[s] == '\r')
            return FLOW_SNIFF_NONE; /* the empty line: the head ended without Host */
        /* obs-fold (RFC 9112 §5.2) is refused rather than unfolded. */
        for (i = s; i < n && tchar(p[i]); i++)
            ;
        if (i < n && (p[i] != ':' || i == s))
            return FLOW_SNIFF_NONE;
        r = line_end(p, n, i, &lf);
        if (r <= 0)
            return r;
        if (i - s == 4 && (p[s] | 0x20) == 'h' && (p[s + 1] | 0x20) == 'o' &&
            (p[s + 2] | 0x20) == 's' && (p[s + 3] | 0x20) == 't')
            return host_value(p + i + 1, lf - i - 1, out, outlen);
        s = lf + 1;
    }
}

int
flow_sniff_http(const unsigned char *p, size_t len, char *out, size_t outlen)
{
    int r;

    if (out == NULL || outlen == 0)
        return FLOW_SNIFF_NONE;
    out[0] = '\0';
    r = head(p, len < HEAD_MAX ? len : HEAD_MAX, out, outlen);
    if (r == FLOW_SNIFF_NEED_MORE && len >= HEAD_MAX)
        return FLOW_SNIFF_NONE;
    return r;
}

int
flow_sniff_is_ip(const char *name)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, name, buf) == 1 || inet_pton(AF_INET6, name, buf) == 1;
}
