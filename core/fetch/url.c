#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "fetch/fetch.h"

/* The URLs remote lists and providers are fetched from. */

int
fetch_url_parse(const char *url, struct fetch_url *u, char *err, size_t errlen)
{
    memset(u, 0, sizeof(*u));
    const char *p;
    if (strncasecmp(url, "http://", 7) == 0) {
        p = url + 7;
    } else if (strncasecmp(url, "https://", 8) == 0) {
        p = url + 8;
        u->https = 1;
    } else {
        snprintf(err, errlen, "url '%.80s': http:// or https:// only", url);
        return -1;
    }
    for (const char *c = url; *c; c++)
        if ((unsigned char)*c <= 0x20 || *c == 0x7f) {
            snprintf(err, errlen, "url: no spaces or control bytes (percent-encode them)");
            return -1;
        }
    size_t alen = strcspn(p, "/?#");
    const char *rest = p + alen;
    if (memchr(p, '@', alen) != NULL) {
        snprintf(err, errlen, "url: no user:password@ (put a token in the path or query)");
        return -1;
    }
    if (alen == 0 || alen >= sizeof(u->authority)) {
        snprintf(err, errlen, "url: %s host", alen == 0 ? "no" : "too long a");
        return -1;
    }
    memcpy(u->authority, p, alen);
    const char *hend = p + alen, *colon = NULL;
    const char *h = p;
    if (*p == '[') {
        const char *rb = memchr(p, ']', alen);
        if (rb == NULL) {
            snprintf(err, errlen, "url: an IPv6 host needs its ']'");
            return -1;
        }
        h = p + 1;
        hend = rb;
        colon = rb + 1 < p + alen ? rb + 1 : NULL;
        if (colon != NULL && *colon != ':') {
            snprintf(err, errlen, "url: bad host");
            return -1;
        }
    } else {
        colon = memchr(p, ':', alen);
        if (colon != NULL)
            hend = colon;
    }
    if (hend == h || (size_t)(hend - h) >= sizeof(u->host)) {
        snprintf(err, errlen, "url: bad host");
        return -1;
    }
    memcpy(u->host, h, (size_t)(hend - h));
    unsigned long port = u->https ? 443 : 80;
    if (colon != NULL) {
        port = 0;
        const char *d = colon + 1;
        if (d == p + alen || p + alen - d > 5)
            port = 0;
        for (; d < p + alen; d++) {
            if (*d < '0' || *d > '9') {
                port = 0;
                break;
            }
            port = port * 10 + (unsigned long)(*d - '0');
        }
        if (port < 1 || port > 65535) {
            snprintf(err, errlen, "url: the port is not 1..65535");
            return -1;
        }
    }
    u->port = (uint16_t)port;
    size_t plen = strcspn(rest, "#");
    if (plen + 2 >= sizeof(u->path)) {
        snprintf(err, errlen, "url: the path is over %zu bytes", sizeof(u->path) - 2);
        return -1;
    }
    if (plen == 0 || rest[0] != '/')
        u->path[0] = '/';
    memcpy(u->path + strlen(u->path), rest, plen);
    return 0;
}

void
fetch_url_shown(const char *url, char *out, size_t outlen)
{
    size_t n = strcspn(url, "?#");
    snprintf(out, outlen, "%.*s%s", (int)(n > 200 ? 200 : n), url, url[n] == '?' ? "?..." : "");
}
