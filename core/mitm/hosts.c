/* PLACEHOLDER until the rewrite branch lands its hosts.c. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mitm/mitm.h"

struct pat {
    char *p;
    uint16_t port;
    int exclude;
};

struct mitm_hosts {
    struct pat *v;
    size_t n;
};

struct mitm_hosts *
mitm_hosts_new(void)
{
    return calloc(1, sizeof(struct mitm_hosts));
}

void
mitm_hosts_free(struct mitm_hosts *h)
{
    if (h == NULL)
        return;
    for (size_t i = 0; i < h->n; i++)
        free(h->v[i].p);
    free(h->v);
    free(h);
}

int
mitm_hosts_add(struct mitm_hosts *h, const char *pattern, size_t len, char *err, size_t errlen)
{
    struct pat p = {.port = 443};
    if (len > 0 && pattern[0] == '-') {
        p.exclude = 1;
        pattern++;
        len--;
    }
    const char *colon = memchr(pattern, ':', len);
    size_t hl = colon ? (size_t)(colon - pattern) : len;
    if (hl == 0) {
        snprintf(err, errlen, "empty host pattern");
        return -1;
    }
    if (colon) {
        long v = strtol(colon + 1, NULL, 10);
        if (v < 1 || v > 65535) {
            snprintf(err, errlen, "bad port in \"%.*s\"", (int)len, pattern);
            return -1;
        }
        p.port = (uint16_t)v;
    }
    struct pat *nv = realloc(h->v, (h->n + 1) * sizeof(*nv));
    if (nv == NULL || (p.p = strndup(pattern, hl)) == NULL) {
        if (nv != NULL)
            h->v = nv;
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    h->v = nv;
    h->v[h->n++] = p;
    return 0;
}

static int
glob(const char *p, const char *s, const char *e)
{
    if (*p == 0)
        return s == e;
    if (*p == '*') {
        for (const char *t = s; t <= e; t++)
            if (glob(p + 1, t, e))
                return 1;
        return 0;
    }
    if (s == e)
        return 0;
    if (*p == '?' || tolower((unsigned char)*p) == tolower((unsigned char)*s))
        return glob(p + 1, s + 1, e);
    return 0;
}

int
mitm_hosts_match(const struct mitm_hosts *h, const char *host, size_t len, uint16_t port)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->v[i].port == port && glob(h->v[i].p, host, host + len))
            return !h->v[i].exclude;
    return 0;
}

size_t
mitm_hosts_count(const struct mitm_hosts *h)
{
    return h->n;
}
