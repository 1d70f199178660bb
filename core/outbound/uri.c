#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "outbound/uri.h"

/* Share-link URIs to proxy fields (uri.h). Every field is copied into the
 * fixed buffers of struct outbound_uri: a value that does not fit is an
 * error, never cut. */

struct sl {
    const char *p;
    size_t n;
};

static struct sl
sl(const char *p, size_t n)
{
    return (struct sl){p, n};
}

static int
sl_eq(struct sl s, const char *lit)
{
    return s.n == strlen(lit) && strncasecmp(s.p, lit, s.n) == 0;
}

static const char *
sl_rchr(struct sl s, char c)
{
    for (size_t i = s.n; i > 0; i--)
        if (s.p[i - 1] == c)
            return s.p + i - 1;
    return NULL;
}

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

/* Percent-decodes |s| into |out| (NUL-terminated). -1: a bad escape, a NUL,
 * or no room. |plus|: '+' means a space (query values). */
static int
pct_decode(struct sl s, char *out, size_t cap, int plus)
{
    size_t o = 0;
    for (size_t i = 0; i < s.n; i++) {
        char c = s.p[i];
        if (c == '%') {
            int a = i + 1 < s.n ? hexval(s.p[i + 1]) : -1;
            int b = i + 2 < s.n ? hexval(s.p[i + 2]) : -1;
            if (a < 0 || b < 0)
                return -1;
            c = (char)(a * 16 + b);
            i += 2;
        } else if (plus && c == '+') {
            c = ' ';
        }
        if (c == '\0' || o + 1 >= cap)
            return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    return 0;
}

static int
b64val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

long
outbound_b64_decode(const char *in, size_t len, uint8_t *out, size_t cap)
{
    uint32_t acc = 0;
    int bits = 0, pad = 0;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == '\r' || c == '\n' || c == ' ' || c == '\t')
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64val(c);
        if (v < 0 || pad > 0)
            return -1; /* a stray byte, or data after the padding */
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= cap)
                return -1;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    if (bits >= 6 || pad > 2)
        return -1; /* one base64 digit alone encodes no byte */
    return (long)o;
}

void
outbound_uri_mask(const char *uri, size_t len, char *out, size_t outlen)
{
    if (outlen == 0)
        return;
    const char *scheme_end = NULL;
    for (size_t i = 0; i + 2 < len; i++)
        if (uri[i] == ':' && uri[i + 1] == '/' && uri[i + 2] == '/') {
            scheme_end = uri + i + 3;
            break;
        }
    /* The pieces: [uri, cut) as is, then "***", then [resume, end). */
    const char *cut = NULL, *resume = NULL;
    if (scheme_end != NULL) {
        const char *end = uri + len, *frag = memchr(scheme_end, '#', (size_t)(end - scheme_end));
        const char *auth_end = frag ? frag : end;
        for (const char *q = scheme_end; q < auth_end; q++)
            if (*q == '/' || *q == '?') {
                auth_end = q;
                break;
            }
        const char *at = sl_rchr(sl(scheme_end, (size_t)(auth_end - scheme_end)), '@');
        if (at != NULL) {
            cut = scheme_end;
            resume = at;
        } else if (len >= 5 && strncasecmp(uri, "ss://", 5) == 0) {
            cut = scheme_end; /* legacy: the whole base64 body holds the password */
            resume = frag ? frag : end;
        }
    }
    size_t o = 0;
    const char *p = uri;
    int masked = 0;
    while (p < uri + len) {
        if (p == cut && !masked) {
            masked = 1;
            for (const char *m = "***"; *m && o + 1 < outlen; m++)
                out[o++] = *m;
            p = resume;
            continue;
        }
        unsigned char c = (unsigned char)*p++;
        char tmp[5];
        int k = c >= 0x20 && c < 0x7f && c != '\\' ? snprintf(tmp, sizeof(tmp), "%c", c)
                                                    : snprintf(tmp, sizeof(tmp), "\\x%02x", c);
        if (o + (size_t)k + 4 >= outlen) {
            for (const char *m = "..."; *m && o + 1 < outlen; m++)
                out[o++] = *m;
            break;
        }
        memcpy(out + o, tmp, (size_t)k);
        o += (size_t)k;
    }
    out[o] = '\0';
}

static int __attribute__((format(printf, 5, 6)))
fail(const char *uri, size_t len, char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return -1;
    char shown[160];
    outbound_uri_mask(uri, len, shown, sizeof(shown));
    int k = snprintf(err, errlen, "%s: ", shown);
    if (k >= 0 && (size_t)k < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int
copy(char *dst, size_t cap, struct sl s)
{
    if (s.n >= cap || memchr(s.p, '\0', s.n) != NULL)
        return -1;
    memcpy(dst, s.p, s.n);
    dst[s.n] = '\0';
    return 0;
}

/* host:port, host in [brackets] for IPv6. 0, or a static reason. */
static const char *
host_port(struct sl s, struct outbound_uri *o)
{
    struct sl host;
    const char *colon;
    if (s.n > 0 && s.p[0] == '[') {
        const char *rb = memchr(s.p, ']', s.n);
        if (rb == NULL)
            return "an IPv6 address needs its ']'";
        host = sl(s.p + 1, (size_t)(rb - s.p - 1));
        colon = rb + 1 < s.p + s.n && rb[1] == ':' ? rb + 1 : NULL;
        if (colon == NULL)
            return "no port (host:port)";
    } else {
        colon = sl_rchr(s, ':');
        if (colon == NULL)
            return "no port (host:port)";
        host = sl(s.p, (size_t)(colon - s.p));
        if (memchr(host.p, ':', host.n) != NULL)
            return "an IPv6 address goes in brackets ([2001:db8::1]:443)";
    }
    if (host.n == 0)
        return "no host";
    if (copy(o->server, sizeof(o->server), host) != 0)
        return "the host is too long";
    const char *d = colon + 1, *end = s.p + s.n;
    unsigned long port = 0;
    if (d == end || end - d > 5)
        return "the port is not 1..65535";
    for (; d < end; d++) {
        if (*d < '0' || *d > '9')
            return "the port is not 1..65535";
        port = port * 10 + (unsigned long)(*d - '0');
    }
    if (port < 1 || port > 65535)
        return "the port is not 1..65535";
    o->port = (uint16_t)port;
    return NULL;
}

/* Splits "user:pass" (percent-encoded) into the fields. */
static int
user_pass(struct sl s, struct outbound_uri *o)
{
    const char *c = memchr(s.p, ':', s.n);
    struct sl u = c ? sl(s.p, (size_t)(c - s.p)) : s;
    struct sl p = c ? sl(c + 1, (size_t)(s.p + s.n - c - 1)) : sl("", 0);
    if (pct_decode(u, o->user, sizeof(o->user), 0) != 0 ||
        pct_decode(p, o->pass, sizeof(o->pass), 0) != 0)
        return -1;
    return 0;
}

/* The query's parameters one by one: |fn| returns NULL or a reason. */
typedef const char *(*param_fn)(struct outbound_uri *o, struct sl k, struct sl v, char *why,
                                size_t whylen);

static const char *
each_param(struct sl q, struct outbound_uri *o, param_fn fn, char *why, size_t whylen)
{
    while (q.n > 0) {
        const char *amp = memchr(q.p, '&', q.n);
        struct sl kv = sl(q.p, amp ? (size_t)(amp - q.p) : q.n);
        const char *eq = memchr(kv.p, '=', kv.n);
        struct sl k = sl(kv.p, eq ? (size_t)(eq - kv.p) : kv.n);
        struct sl v = eq ? sl(eq + 1, (size_t)(kv.p + kv.n - eq - 1)) : sl("", 0);
        const char *e = kv.n > 0 ? fn(o, k, v, why, whylen) : NULL;
        if (e != NULL)
            return e;
        if (amp == NULL)
            break;
        q = sl(amp + 1, (size_t)(q.p + q.n - amp - 1));
    }
    return NULL;
}

static int
truthy(struct sl v)
{
    return sl_eq(v, "1") || sl_eq(v, "true");
}

static const char *
ss_param(struct outbound_uri *o, struct sl k, struct sl v, char *why, size_t whylen)
{
    if (sl_eq(k, "plugin")) {
        char plugin[64];
        if (pct_decode(v, plugin, sizeof(plugin), 1) != 0)
            snprintf(plugin, sizeof(plugin), "...");
        char *semi = strchr(plugin, ';');
        if (semi != NULL)
            *semi = '\0';
        snprintf(why, whylen, "plugin=%s is not supported (chute speaks plain Shadowsocks "
                 "AEAD; a plugin such as obfs or v2ray-plugin changes the wire)", plugin);
        return why;
    }
    return NULL;
}

static const char *
trojan_param(struct outbound_uri *o, struct sl k, struct sl v, char *why, size_t whylen)
{
    if (sl_eq(k, "sni") || sl_eq(k, "peer")) {
        if (pct_decode(v, o->sni, sizeof(o->sni), 1) != 0)
            return "sni: bad percent-encoding or too long";
    } else if (sl_eq(k, "allowInsecure") || sl_eq(k, "insecure") ||
               sl_eq(k, "skip-cert-verify")) {
        o->skip_cert_verify = truthy(v);
    } else if (sl_eq(k, "type") && !sl_eq(v, "tcp") && v.n > 0) {
        snprintf(why, whylen, "type=%.*s is not supported (chute's Trojan runs over TLS on "
                 "TCP only)", (int)(v.n > 16 ? 16 : v.n), v.p);
        return why;
    } else if (sl_eq(k, "security") && !sl_eq(v, "tls") && v.n > 0) {
        snprintf(why, whylen, "security=%.*s is not supported (TLS only)",
                 (int)(v.n > 16 ? 16 : v.n), v.p);
        return why;
    }
    return NULL;
}

/* ss: SIP002 or legacy. |body| is after "ss://" up to the fragment. */
static const char *
parse_ss(struct sl body, struct outbound_uri *o, char *why, size_t whylen)
{
    struct sl q = sl("", 0);
    const char *qm = memchr(body.p, '?', body.n);
    if (qm != NULL) {
        q = sl(qm + 1, (size_t)(body.p + body.n - qm - 1));
        body.n = (size_t)(qm - body.p);
    }
    if (body.n > 0 && body.p[body.n - 1] == '/')
        body.n--; /* SIP002's "host:port/?plugin=" */
    const char *e = each_param(q, o, ss_param, why, whylen);
    if (e != NULL)
        return e;
    char legacy[1024];
    const char *at = sl_rchr(body, '@');
    struct sl userinfo, hp;
    if (at == NULL) {
        long n = outbound_b64_decode(body.p, body.n, (uint8_t *)legacy, sizeof(legacy) - 1);
        if (n <= 0)
            return "neither SIP002 (userinfo@host:port) nor legacy base64";
        struct sl d = sl(legacy, (size_t)n);
        at = sl_rchr(d, '@');
        if (at == NULL)
            return "the legacy base64 body is not method:password@host:port";
        userinfo = sl(legacy, (size_t)(at - legacy));
        hp = sl(at + 1, (size_t)(legacy + n - at - 1));
        const char *c = memchr(userinfo.p, ':', userinfo.n);
        if (c == NULL)
            return "the legacy base64 body has no method:password";
        if (copy(o->cipher, sizeof(o->cipher), sl(userinfo.p, (size_t)(c - userinfo.p))) != 0 ||
            copy(o->pass, sizeof(o->pass), sl(c + 1, (size_t)(userinfo.p + userinfo.n - c - 1))) !=
                0)
            return "the method or the password is too long";
    } else {
        userinfo = sl(body.p, (size_t)(at - body.p));
        hp = sl(at + 1, (size_t)(body.p + body.n - at - 1));
        char dec[600];
        if (pct_decode(userinfo, dec, sizeof(dec), 0) != 0)
            return "bad percent-encoding in the userinfo";
        char *c = strchr(dec, ':');
        if (c == NULL) { /* base64(method:password) */
            long n = outbound_b64_decode(dec, strlen(dec), (uint8_t *)legacy, sizeof(legacy) - 1);
            if (n <= 0)
                return "the userinfo is neither base64 nor method:password";
            legacy[n] = '\0';
            if (memchr(legacy, '\0', (size_t)n) != NULL)
                return "the userinfo decodes to binary bytes";
            c = strchr(legacy, ':');
            if (c == NULL)
                return "the userinfo decodes to no method:password";
            memcpy(dec, legacy, (size_t)n + 1 < sizeof(dec) ? (size_t)n + 1 : sizeof(dec));
            dec[sizeof(dec) - 1] = '\0';
            c = strchr(dec, ':');
            if (c == NULL)
                return "the userinfo is too long";
        }
        *c = '\0';
        if (copy(o->cipher, sizeof(o->cipher), sl(dec, strlen(dec))) != 0 ||
            copy(o->pass, sizeof(o->pass), sl(c + 1, strlen(c + 1))) != 0)
            return "the method or the password is too long";
    }
    if (o->cipher[0] == '\0' || o->pass[0] == '\0')
        return "needs a method and a password";
    for (char *p = o->cipher; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    snprintf(o->type, sizeof(o->type), "shadowsocks");
    return host_port(hp, o);
}

/* authority [/path] [?query] for trojan, socks5, http(s). */
static const char *
parse_authority(struct sl body, struct outbound_uri *o, int need_user, param_fn params,
                char *why, size_t whylen)
{
    struct sl q = sl("", 0);
    const char *qm = memchr(body.p, '?', body.n);
    if (qm != NULL) {
        q = sl(qm + 1, (size_t)(body.p + body.n - qm - 1));
        body.n = (size_t)(qm - body.p);
    }
    const char *slash = memchr(body.p, '/', body.n);
    if (slash != NULL) {
        if (slash + 1 != body.p + body.n)
            return "a proxy URI has no path";
        body.n = (size_t)(slash - body.p);
    }
    const char *at = sl_rchr(body, '@');
    struct sl hp = body;
    if (at != NULL) {
        struct sl ui = sl(body.p, (size_t)(at - body.p));
        hp = sl(at + 1, (size_t)(body.p + body.n - at - 1));
        if (need_user) { /* trojan: the whole userinfo is the password */
            if (pct_decode(ui, o->pass, sizeof(o->pass), 0) != 0)
                return "bad percent-encoding in the password, or too long";
        } else if (user_pass(ui, o) != 0) {
            return "bad percent-encoding in user:password, or too long";
        }
        if (!need_user && (o->user[0] == '\0' || o->pass[0] == '\0'))
            return "user and password go together (user:password@)";
    } else if (need_user) {
        return "needs a password (trojan://password@host:port)";
    }
    const char *e = host_port(hp, o);
    if (e != NULL)
        return e;
    return params != NULL ? each_param(q, o, params, why, whylen) : NULL;
}

int
outbound_uri_parse(const char *uri, size_t len, struct outbound_uri *out, char *err,
                   size_t errlen)
{
    memset(out, 0, sizeof(*out));
    out->udp = -1;
    struct sl s = sl(uri, len);
    while (s.n > 0 && (s.p[s.n - 1] == '\r' || s.p[s.n - 1] == ' ' || s.p[s.n - 1] == '\t'))
        s.n--;
    const char *sep = NULL;
    for (size_t i = 0; i + 2 < s.n; i++)
        if (s.p[i] == ':' && s.p[i + 1] == '/' && s.p[i + 2] == '/') {
            sep = s.p + i;
            break;
        }
    if (sep == NULL)
        return fail(uri, len, err, errlen, "not a URI (scheme://...)");
    struct sl scheme = sl(s.p, (size_t)(sep - s.p));
    struct sl body = sl(sep + 3, (size_t)(s.p + s.n - sep - 3));
    const char *hash = memchr(body.p, '#', body.n);
    if (hash != NULL) {
        struct sl frag = sl(hash + 1, (size_t)(body.p + body.n - hash - 1));
        char name[256];
        if (pct_decode(frag, name, sizeof(name), 0) != 0)
            return fail(uri, len, err, errlen, "the #name has bad percent-encoding or is too long");
        snprintf(out->name, sizeof(out->name), "%.*s", (int)sizeof(out->name) - 1, name);
        body.n = (size_t)(hash - body.p);
    }
    char why[200];
    const char *e;
    if (sl_eq(scheme, "ss")) {
        e = parse_ss(body, out, why, sizeof(why));
    } else if (sl_eq(scheme, "trojan")) {
        snprintf(out->type, sizeof(out->type), "trojan");
        e = parse_authority(body, out, 1, trojan_param, why, sizeof(why));
    } else if (sl_eq(scheme, "socks5") || sl_eq(scheme, "socks5h") || sl_eq(scheme, "socks")) {
        snprintf(out->type, sizeof(out->type), "socks5");
        e = parse_authority(body, out, 0, NULL, why, sizeof(why));
    } else if (sl_eq(scheme, "http") || sl_eq(scheme, "https")) {
        snprintf(out->type, sizeof(out->type), "%s", scheme.n == 5 ? "https" : "http");
        e = parse_authority(body, out, 0, NULL, why, sizeof(why));
    } else {
        return fail(uri, len, err, errlen, "scheme '%.*s' is not one chute speaks (ss, trojan, "
                    "socks5, http, https)", (int)(scheme.n > 16 ? 16 : scheme.n), scheme.p);
    }
    if (e != NULL)
        return fail(uri, len, err, errlen, "%s", e);
    return 0;
}
