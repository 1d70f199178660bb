#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mitm/mitm.h"

/* Surge's Host List ([MITM] hostname): entries are tried in order and the
 * first whose host and port both match decides; a leading '-' makes that
 * decision "no". A bare host means port 443, ":0" any port. Besides
 * wildcards ('*' any run of characters, dots included; '?' one), an entry
 * may be an IP literal (compared as an address, so "::1" and
 * "0:0::1" are one), or one of Surge's classes: <ip-address>,
 * <ipv4-address>, <ipv6-address>, <simple-hostname> (no dot). */

#define DEFAULT_PORT 443
#define MAX_HOST 255

enum kind {
    K_GLOB,
    K_IP,
    K_ANY_IP,
    K_ANY_IP4,
    K_ANY_IP6,
    K_SIMPLE,
};

struct entry {
    char *glob; /* K_GLOB: lower case, without a trailing dot */
    uint8_t ip[16];
    int family;  /* K_IP: AF_INET or AF_INET6 */
    uint8_t kind, excl;
    int any_port;
    uint16_t port;
};

struct mitm_hosts {
    struct entry *v;
    size_t n, cap;
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
        free(h->v[i].glob);
    free(h->v);
    free(h);
}

size_t
mitm_hosts_count(const struct mitm_hosts *h)
{
    return h->n;
}

int
mitm_hosts_port_used(const struct mitm_hosts *h, uint16_t port)
{
    for (size_t i = 0; h != NULL && i < h->n; i++)
        if (!h->v[i].excl && (h->v[i].any_port || h->v[i].port == port))
            return 1;
    return 0;
}

/* An address literal of |len| bytes at |s| (no brackets): its family, 0 if
 * none. */
static int
parse_ip(const char *s, size_t len, uint8_t out[16])
{
    char buf[64];
    if (len == 0 || len >= sizeof(buf))
        return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (inet_pton(AF_INET, buf, out) == 1)
        return AF_INET;
    if (inet_pton(AF_INET6, buf, out) == 1)
        return AF_INET6;
    return 0;
}

static int
class_kind(const char *s, size_t len)
{
    static const struct {
        const char *name;
        int kind;
    } classes[] = {
        {"<ip-address>", K_ANY_IP},
        {"<ipv4-address>", K_ANY_IP4},
        {"<ipv6-address>", K_ANY_IP6},
        {"<simple-hostname>", K_SIMPLE},
    };
    for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
        if (strlen(classes[i].name) == len && strncasecmp(s, classes[i].name, len) == 0)
            return classes[i].kind;
    return -1;
}

static int
parse_port(const char *s, size_t len, struct entry *e)
{
    unsigned long v = 0;
    if (len == 0 || len > 5)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    e->any_port = v == 0;
    e->port = (uint16_t)v;
    return 0;
}

int
mitm_hosts_add(struct mitm_hosts *h, const char *pattern, size_t len, char *err, size_t errlen)
{
    struct entry e = {0};
    const char *p = pattern, *host, *port = NULL;
    size_t n = len, hlen, plen = 0;

    if (n > 0 && p[0] == '-') {
        e.excl = 1;
        p++;
        n--;
    }
    for (size_t i = 0; i < len; i++)
        if (pattern[i] == ' ' || pattern[i] == '\t' || pattern[i] == ',' ||
            (unsigned char)pattern[i] < 0x20) {
            snprintf(err, errlen, "host pattern '%.*s' has a space, comma or control byte "
                     "(one host per entry: \"*.example.com\", \"-a.example.com\", \"b.example:8443\")",
                     (int)len, pattern);
            return -1;
        }
    if (n == 0) {
        snprintf(err, errlen, "empty host pattern '%.*s' (e.g. \"*.example.com\")", (int)len,
                 pattern);
        return -1;
    }
    if (p[0] == '[') { /* "[v6]" or "[v6]:port" */
        const char *close = memchr(p, ']', n);
        if (close == NULL || (close + 1 < p + n && close[1] != ':'))
            goto bad;
        host = p + 1;
        hlen = (size_t)(close - host);
        if (close + 1 < p + n) {
            port = close + 2;
            plen = (size_t)(p + n - port);
        }
        if (parse_ip(host, hlen, e.ip) != AF_INET6)
            goto bad;
    } else {
        const char *c1 = memchr(p, ':', n);
        host = p;
        hlen = n;
        /* One colon separates a port; more make an IPv6 literal. */
        if (c1 != NULL && memchr(c1 + 1, ':', (size_t)(p + n - c1 - 1)) == NULL) {
            hlen = (size_t)(c1 - p);
            port = c1 + 1;
            plen = (size_t)(p + n - port);
        }
    }
    if (port != NULL) {
        if (parse_port(port, plen, &e) != 0) {
            snprintf(err, errlen, "host pattern '%.*s': bad port '%.*s' (1..65535, or 0 for "
                     "every port)", (int)len, pattern, (int)plen, port);
            return -1;
        }
    } else {
        e.port = DEFAULT_PORT;
    }
    if (hlen == 0)
        goto bad;
    int kind = class_kind(host, hlen);
    if (kind >= 0) {
        e.kind = (uint8_t)kind;
    } else if ((e.family = parse_ip(host, hlen, e.ip)) != 0) {
        e.kind = K_IP;
    } else {
        if (hlen > 1 && host[hlen - 1] == '.')
            hlen--;
        for (size_t i = 0; i < hlen; i++) {
            unsigned char c = (unsigned char)host[i];
            if (!isalnum(c) && c != '-' && c != '.' && c != '_' && c != '*' && c != '?')
                goto bad;
        }
        e.kind = K_GLOB;
        e.glob = malloc(hlen + 1);
        if (e.glob == NULL)
            goto oom;
        for (size_t i = 0; i < hlen; i++)
            e.glob[i] = (char)tolower((unsigned char)host[i]);
        e.glob[hlen] = '\0';
    }
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 8;
        struct entry *v = realloc(h->v, cap * sizeof(*v));
        if (v == NULL)
            goto oom;
        h->v = v;
        h->cap = cap;
    }
    h->v[h->n++] = e;
    return 0;

bad:
    snprintf(err, errlen, "host pattern '%.*s' is not a host name, wildcard or IP literal "
             "(\"*.example.com\", \"api.example.net:8443\", \"[2001:db8::1]:443\", "
             "\"<ip-address>\")", (int)len, pattern);
    free(e.glob);
    return -1;
oom:
    snprintf(err, errlen, "out of memory");
    free(e.glob);
    return -1;
}

/* Case-insensitive wildcard match: '*' any run (dots too), '?' one byte.
 * Backtracks only to the last star, so the cost is at most len(p)*len(s). */
static int
glob_match(const char *p, const char *s, size_t n)
{
    size_t i = 0, j = 0, star_p = (size_t)-1, star_s = 0;
    while (i < n) {
        unsigned char c = (unsigned char)tolower((unsigned char)s[i]);
        if (p[j] == '*') {
            star_p = j++;
            star_s = i;
        } else if (p[j] != '\0' && (p[j] == '?' || (unsigned char)p[j] == c)) {
            i++;
            j++;
        } else if (star_p != (size_t)-1) {
            j = star_p + 1;
            i = ++star_s;
        } else {
            return 0;
        }
    }
    while (p[j] == '*')
        j++;
    return p[j] == '\0';
}

int
mitm_hosts_match(const struct mitm_hosts *h, const char *host, size_t len, uint16_t port)
{
    uint8_t ip[16];
    if (len >= 2 && host[0] == '[' && host[len - 1] == ']') {
        host++;
        len -= 2;
    }
    if (len > 1 && host[len - 1] == '.')
        len--;
    int family = parse_ip(host, len, ip);
    int dotted = memchr(host, '.', len) != NULL;
    for (size_t i = 0; i < h->n; i++) {
        const struct entry *e = &h->v[i];
        int hit;
        if (!e->any_port && e->port != port)
            continue;
        switch (e->kind) {
        case K_GLOB:
            hit = len <= MAX_HOST && glob_match(e->glob, host, len);
            break;
        case K_IP:
            hit = family == e->family &&
                  memcmp(ip, e->ip, family == AF_INET ? 4 : 16) == 0;
            break;
        case K_ANY_IP:
            hit = family != 0;
            break;
        case K_ANY_IP4:
            hit = family == AF_INET;
            break;
        case K_ANY_IP6:
            hit = family == AF_INET6;
            break;
        default: /* K_SIMPLE */
            hit = family == 0 && !dotted && len > 0;
            break;
        }
        if (hit)
            return !e->excl;
    }
    return 0;
}
