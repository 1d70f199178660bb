#include <string.h>

#include "mitm/rewrite_int.h"

/* URL patterns with a prefilter. Modules are mostly lines like
 * "^https?://ads\.example\.com/.*\.gif _ reject", hundreds of them, and
 * every MITM'd request is matched against all: a regex run each (~100 ns
 * with JIT) adds up to microseconds. A regex that starts with an anchored
 * scheme and a plain literal can only match URLs that start with them, so
 * a memcmp decides most rules.
 *
 * The literal is read conservatively: the regex must start with "^http"
 * (then "s", "s?" or "(s)?"), "://" or ":\/\/", and have no '|' outside
 * parentheses (a top-level alternation escapes the anchor); one with
 * \Q...\E, (?#...) or extended mode (?x), whose bytes do not mean what
 * they look like, gets no prefilter. The literal then runs over
 * letters, digits, '-', '_', '/', ':' and the escapes "\." "\-" "\/", and
 * stops at anything else; an atom followed by '?', '*' or '{' may be
 * absent, so it stops before it, and one followed by '+' ends it. */

/* Parses the scheme at |*s|; the RW_SCHEME_* it allows, 0 if not plain. */
static int
scheme(const char **s, const char *end)
{
    const char *p = *s;
    int allow;
    if (end - p < 5 || memcmp(p, "^http", 5) != 0)
        return 0;
    p += 5;
    if (end - p >= 4 && memcmp(p, "(s)?", 4) == 0) {
        allow = RW_SCHEME_HTTP | RW_SCHEME_HTTPS;
        p += 4;
    } else if (end - p >= 2 && memcmp(p, "s?", 2) == 0) {
        allow = RW_SCHEME_HTTP | RW_SCHEME_HTTPS;
        p += 2;
    } else if (p < end && *p == 's') {
        allow = RW_SCHEME_HTTPS;
        p++;
    } else {
        allow = RW_SCHEME_HTTP;
    }
    if (end - p >= 3 && memcmp(p, "://", 3) == 0)
        p += 3;
    else if (end - p >= 5 && memcmp(p, ":\\/\\/", 5) == 0)
        p += 5;
    else
        return 0;
    *s = p;
    return allow;
}

/* 1 when |t| may be an alternation at its top level (or is too odd to
 * tell). */
static int
top_level_bar(struct mem_slice t)
{
    int depth = 0;
    for (size_t i = 0; i < t.len; i++) {
        char c = t.ptr[i];
        if (c == '\\') {
            if (i + 1 < t.len && t.ptr[i + 1] == 'Q')
                return 1;
            i++;
        } else if (c == '[') {
            size_t j = i + 1;
            if (j < t.len && t.ptr[j] == '^')
                j++;
            if (j < t.len && t.ptr[j] == ']')
                j++; /* "[]...]": the first ']' is a member */
            for (; j < t.len && t.ptr[j] != ']'; j++)
                if (t.ptr[j] == '\\' || (t.ptr[j] == '[' && j + 1 < t.len && t.ptr[j + 1] == ':'))
                    return 1; /* escapes and POSIX classes inside: not worth reading */
            i = j;
        } else if (c == '(') {
            if (i + 2 < t.len && t.ptr[i + 1] == '?') {
                if (t.ptr[i + 2] == '#')
                    return 1;
                for (size_t j = i + 2; j < t.len && t.ptr[j] != ')' && t.ptr[j] != ':'; j++)
                    if (t.ptr[j] == 'x')
                        return 1;
            }
            depth++;
        } else if (c == ')') {
            depth--;
        } else if (c == '|' && depth <= 0) {
            return 1;
        }
    }
    return 0;
}

static void
derive(struct rw_pattern *pat, struct mem_slice t)
{
    const char *p = t.ptr, *end = t.ptr + t.len;
    if (top_level_bar(t))
        return;
    int allow = scheme(&p, end);
    if (allow == 0)
        return;
    size_t n = 0;
    while (p < end && n < sizeof(pat->lit)) {
        char c;
        const char *next;
        if (*p == '\\' && p + 1 < end && (p[1] == '.' || p[1] == '-' || p[1] == '/')) {
            c = p[1];
            next = p + 2;
        } else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                   (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '/' ||
                   *p == ':') {
            c = *p;
            next = p + 1;
        } else {
            break;
        }
        if (next < end && (*next == '?' || *next == '*' || *next == '{'))
            break;
        pat->lit[n++] = c;
        if (next < end && *next == '+')
            break;
        p = next;
    }
    pat->len = (uint8_t)n;
    pat->scheme = (uint8_t)allow;
}

int
rw_pattern_init(struct rw_parser *p, struct rw_pattern *pat, struct mem_slice t)
{
    memset(pat, 0, sizeof(*pat));
    if ((pat->re = rw_regex(p, t, 0)) == NULL)
        return -1;
    derive(pat, t);
    return 0;
}

/* Whether |url| can match at all. */
static int
may_match(const struct rw_pattern *pat, struct mem_slice url)
{
    size_t skip;
    if (pat->scheme == 0)
        return 1;
    if ((pat->scheme & RW_SCHEME_HTTPS) && url.len >= 8 && memcmp(url.ptr, "https://", 8) == 0)
        skip = 8;
    else if ((pat->scheme & RW_SCHEME_HTTP) && url.len >= 7 && memcmp(url.ptr, "http://", 7) == 0)
        skip = 7;
    else
        return 0;
    return url.len - skip >= pat->len && memcmp(url.ptr + skip, pat->lit, pat->len) == 0;
}

int
rw_pattern_match(const struct rw_pattern *pat, struct mem_slice url, size_t *ov, int npairs)
{
    if (!may_match(pat, url))
        return 0;
    int rc = rules_re_match(pat->re, url.ptr, url.len, ov, npairs);
    return rc == RULES_RE_NOMATCH ? 0 : rc;
}
