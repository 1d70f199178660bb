#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fetch/sub.h"

/* Which form a body is in: a Clash document has a top-level "proxies:"
 * key; URI lines have "://" on every line; base64 is base64 bytes only
 * and decodes to URI lines. Anything else is described by its first
 * bytes, so the log says what the URL served instead. */

#define MAX_LINE 8192

const char *
fetch_sub_format_name(enum fetch_sub_format f)
{
    static const char *const names[] = {"clash", "base64", "lines"};
    return (unsigned)f < 3 ? names[f] : "?";
}

static int
is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* A line that starts "proxies:" at column 0. */
static int
has_proxies_key(const char *buf, size_t len)
{
    for (size_t i = 0; i < len;) {
        if (len - i >= 8 && memcmp(buf + i, "proxies:", 8) == 0)
            return 1;
        const char *nl = memchr(buf + i, '\n', len - i);
        if (nl == NULL)
            break;
        i = (size_t)(nl - buf) + 1;
    }
    return 0;
}

static int
all_base64(const char *buf, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (is_space((char)c))
            continue;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/' || c == '-' || c == '_' || c == '='))
            return 0;
        n++;
    }
    return n >= 8;
}

/* Every non-empty line (not a # comment) holds "://". */
static int
uri_lines(const char *buf, size_t len)
{
    size_t lines = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - buf) : len, b = i;
        while (b < e && is_space(buf[b]))
            b++;
        if (b < e && buf[b] != '#') {
            if (memmem(buf + b, e - b, "://", 3) == NULL)
                return 0;
            lines++;
        }
        i = e + 1;
    }
    return lines > 0;
}

static void
describe(const char *buf, size_t len, char *err, size_t errlen)
{
    size_t i = 0;
    while (i < len && is_space(buf[i]))
        i++;
    const char *p = buf + i;
    size_t n = len - i;
    const char *what;
    if (n == 0)
        what = "it is empty";
    else if (memchr(p, '\0', n) != NULL)
        what = "it looks like binary data";
    else if (n >= 5 && (strncasecmp(p, "<!doc", 5) == 0 || strncasecmp(p, "<html", 5) == 0))
        what = "it looks like an HTML page (a login or error page?)";
    else if (p[0] == '<')
        what = "it looks like XML or HTML";
    else if (p[0] == '{' || p[0] == '[')
        what = p[0] == '[' && n > 1 && p[1] != '{' && p[1] != '"' && !is_space(p[1])
                   ? "it looks like an INI/Surge profile ([Proxy] sections), not a proxy list"
                   : "it looks like JSON (sing-box or v2ray configs are not read)";
    else if (memmem(p, n, "DOMAIN", 6) != NULL || memmem(p, n, "payload:", 8) != NULL)
        what = "it looks like a rule list, not a proxy list";
    else if (memchr(p, ':', n) != NULL && memchr(p, '\n', n) != NULL)
        what = "it looks like a YAML document without a top-level proxies: list";
    else
        what = "it is not a Clash proxies: list, base64 of URIs, nor URI lines";
    snprintf(err, errlen, "not a subscription: %s", what);
}

struct lines_ctx {
    const struct fetch_sub_ops *ops;
    void *arg;
    long count;
};

static void
decode_lines(struct lines_ctx *c, const char *buf, size_t len)
{
    unsigned line = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - buf) : len, b = i;
        line++;
        i = e + 1;
        while (b < e && is_space(buf[b]))
            b++;
        while (e > b && is_space(buf[e - 1]))
            e--;
        if (b == e || buf[b] == '#')
            continue;
        struct outbound_uri u;
        char why[320];
        if (e - b > MAX_LINE) {
            c->ops->skip(c->arg, line, "a line over 8 KiB");
            continue;
        }
        if (outbound_uri_parse(buf + b, e - b, &u, why, sizeof(why)) != 0) {
            c->ops->skip(c->arg, line, why);
            continue;
        }
        c->ops->proxy(c->arg, &u, line);
        c->count++;
    }
}

static long
decode_clash(const char *buf, size_t len, const struct fetch_sub_ops *ops, void *arg, char *err,
             size_t errlen)
{
    char why[320];
    struct fetch_yaml *y = fetch_yaml_parse(buf, len, why, sizeof(why));
    if (y == NULL) {
        snprintf(err, errlen, "a Clash document that is not valid YAML: %s", why);
        return -1;
    }
    fetch_yaml_node list = fetch_yaml_get(y, fetch_yaml_root(y), "proxies");
    if (!fetch_yaml_is_seq(y, list)) {
        snprintf(err, errlen, "a YAML document whose proxies: is not a list (line %u)",
                 fetch_yaml_line(y, list));
        fetch_yaml_free(y);
        return -1;
    }
    long count = 0;
    for (size_t i = 0; i < fetch_yaml_len(y, list); i++) {
        fetch_yaml_node n = fetch_yaml_item(y, list, i);
        struct outbound_uri u;
        if (fetch_clash_proxy(y, n, &u, why, sizeof(why)) != 0) {
            ops->skip(arg, fetch_yaml_line(y, n), why);
            continue;
        }
        ops->proxy(arg, &u, fetch_yaml_line(y, n));
        count++;
    }
    fetch_yaml_free(y);
    return count;
}

long
fetch_sub_decode(const char *buf, size_t len, const struct fetch_sub_ops *ops, void *arg,
                 enum fetch_sub_format *fmt, char *err, size_t errlen)
{
    enum fetch_sub_format f;
    long count;
    if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0) { /* a UTF-8 BOM */
        buf += 3;
        len -= 3;
    }
    if (memchr(buf, '\0', len) == NULL && has_proxies_key(buf, len)) {
        f = FETCH_SUB_CLASH;
        count = decode_clash(buf, len, ops, arg, err, errlen);
    } else if (uri_lines(buf, len)) {
        struct lines_ctx c = {ops, arg, 0};
        f = FETCH_SUB_LINES;
        decode_lines(&c, buf, len);
        count = c.count;
    } else if (all_base64(buf, len)) {
        uint8_t *d = malloc(len / 4 * 3 + 4);
        if (d == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        long n = outbound_b64_decode(buf, len, d, len / 4 * 3 + 4);
        if (n <= 0 || memchr(d, '\0', (size_t)n) != NULL || !uri_lines((char *)d, (size_t)n)) {
            snprintf(err, errlen, "not a subscription: it looks like base64, but %s",
                     n <= 0 ? "does not decode" : "its text is not URI lines");
            free(d);
            return -1;
        }
        struct lines_ctx c = {ops, arg, 0};
        f = FETCH_SUB_BASE64;
        decode_lines(&c, (char *)d, (size_t)n);
        count = c.count;
        free(d);
    } else {
        describe(buf, len, err, errlen);
        return -1;
    }
    if (fmt != NULL)
        *fmt = f;
    if (count == 0) {
        snprintf(err, errlen, "a %s subscription with no proxy chute can use",
                 fetch_sub_format_name(f));
        return -1;
    }
    return count;
}
