/* Request-target splitting for a proxy (RFC 9112 §3.2.2-3.2.3): the
 * absolute form a forward proxy receives and the authority form of CONNECT.
 * The host is checked here because it goes on to name resolution and to
 * routing rules, where stray bytes must not arrive. */

#include <arpa/inet.h>
#include <string.h>
#include <strings.h>

#include "http/http.h"

/* reg-name (RFC 3986 §3.2.2): unreserved, sub-delims and pct-encoded. */
static int
is_regname(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c != '\0' && strchr("-._~!$&'()*+,;=%", c) != NULL;
}

/* inet_pton is the strict check we want, but it needs a C string. */
static int
is_ipv6(struct mem_slice s)
{
    char tmp[INET6_ADDRSTRLEN];
    unsigned char addr[16];

    if (s.len == 0 || s.len >= sizeof(tmp))
        return 0;
    memcpy(tmp, s.ptr, s.len);
    tmp[s.len] = '\0';
    return inet_pton(AF_INET6, tmp, addr) == 1;
}

/* authority = host [ ":" port ], without userinfo: '@' is not a reg-name
 * byte, which refuses "user@host" along with every other stray byte. An
 * empty port ("host:") counts as none given (RFC 3986 §3.2.3). */
static int
split_authority(struct mem_slice a, uint16_t dflt, struct mem_slice *host, uint16_t *port)
{
    const char *p = a.ptr, *end = a.ptr + a.len;
    unsigned v = 0;

    if (a.len == 0)
        return HTTP_ERR_BAD;
    if (*p == '[') {
        const char *close = memchr(p, ']', a.len);

        if (close == NULL)
            return HTTP_ERR_BAD;
        *host = mem_slice(p + 1, (size_t)(close - p - 1));
        if (!is_ipv6(*host))
            return HTTP_ERR_BAD;
        p = close + 1;
    } else {
        const char *q = p;

        while (q < end && *q != ':')
            if (!is_regname((unsigned char)*q++))
                return HTTP_ERR_BAD;
        if (q == p)
            return HTTP_ERR_BAD;
        *host = mem_slice(p, (size_t)(q - p));
        p = q;
    }
    if (p < end && *p++ != ':')
        return HTTP_ERR_BAD;
    if (p == end) {
        *port = dflt;
        return 0;
    }
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return HTTP_ERR_BAD;
        v = v * 10 + (unsigned)(*p - '0');
        if (v > 65535)
            return HTTP_ERR_BAD;
    }
    if (v == 0)
        return HTTP_ERR_BAD;
    *port = (uint16_t)v;
    return 0;
}

int
http_target_split(struct mem_slice target, int authority_form, struct mem_slice *host,
                  uint16_t *port, struct mem_slice *path)
{
    static const char slash[] = "/";
    struct mem_slice auth, h, pa;
    const char *p, *end, *q;
    uint16_t po, dflt;

    if (target.ptr == NULL || target.len == 0)
        return HTTP_ERR_BAD;
    p = target.ptr;
    end = p + target.len;
    if (authority_form) {
        auth = target;
        pa = mem_slice(end, 0);
        dflt = 0;
    } else {
        if (target.len < 7 || strncasecmp(p, "http://", 7) != 0)
            return HTTP_ERR_BAD;
        p += 7;
        for (q = p; q < end && *q != '/' && *q != '?' && *q != '#'; q++)
            ;
        auth = mem_slice(p, (size_t)(q - p));
        /* "http://h?q" means path "/?q", which no view of |target| spells;
         * refusing it beats forwarding "?q" as a path. */
        if (q == end)
            pa = mem_slice(slash, 1);
        else if (*q == '/')
            pa = mem_slice(q, (size_t)(end - q));
        else
            return HTTP_ERR_BAD;
        dflt = 80;
    }
    if (split_authority(auth, dflt, &h, &po) != 0)
        return HTTP_ERR_BAD;
    *host = h;
    *port = po;
    *path = pa;
    return 0;
}
