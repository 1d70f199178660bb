#include <stdlib.h>
#include <string.h>

#include "rules/rules.h"

/* Wildcard host patterns, matched one after another in tag order (they
 * are few in real lists). Three dialects (rules.h): mihomo's and Surge's
 * DOMAIN-WILDCARD, where '*' is any run of characters including dots and
 * none, and a Clash domain provider's '*', exactly one whole label. */

#define HOST_MAX 253

struct wild {
    char *pat; /* lowercased, no root dot */
    size_t len;
    enum rules_wild_kind kind;
    uint32_t tag;
};

struct rules_wildcards {
    struct wild *w;
    size_t n, cap;
};

static inline unsigned char
lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

struct rules_wildcards *
rules_wildcards_new(void)
{
    return calloc(1, sizeof(struct rules_wildcards));
}

void
rules_wildcards_free(struct rules_wildcards *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->w[i].pat);
    free(w->w);
    free(w);
}

size_t
rules_wildcards_count(const struct rules_wildcards *w)
{
    return w != NULL ? w->n : 0;
}

int
rules_wildcards_add(struct rules_wildcards *w, enum rules_wild_kind kind, const char *pat,
                    size_t len, uint32_t tag)
{
    if (w == NULL || pat == NULL)
        return -1;
    if (len > 0 && pat[len - 1] == '.')
        len--;
    if (len == 0 || len > HOST_MAX || memchr(pat, '\0', len) != NULL)
        return -1;
    if (w->n == w->cap) {
        size_t n = w->cap ? w->cap * 2 : 8;
        struct wild *p = realloc(w->w, n * sizeof(*p));
        if (p == NULL)
            return -1;
        w->w = p;
        w->cap = n;
    }
    char *s = malloc(len + 1);
    if (s == NULL)
        return -1;
    for (size_t i = 0; i < len; i++)
        s[i] = (char)lower((unsigned char)pat[i]);
    s[len] = '\0';
    size_t i = w->n;
    while (i > 0 && w->w[i - 1].tag > tag) {
        w->w[i] = w->w[i - 1];
        i--;
    }
    w->w[i] = (struct wild){s, len, kind, tag};
    w->n++;
    return 0;
}

/* Surge's "[...]" at |p| (past the '['): whether |c| is in the class, and
 * where the class ends in *end. "[!...]" and "[^...]" negate, "a-z" is a
 * range. An unclosed '[' is a literal '['. */
static int
in_class(const char *p, const char *pe, unsigned char c, const char **end)
{
    const char *q = p;
    int neg = 0, hit = 0;

    if (q < pe && (*q == '!' || *q == '^')) {
        neg = 1;
        q++;
    }
    for (const char *first = q; q < pe && (*q != ']' || q == first); q++) {
        unsigned char lo = (unsigned char)*q, hi = lo;
        if (q + 2 < pe && q[1] == '-' && q[2] != ']') {
            hi = (unsigned char)q[2];
            q += 2;
        }
        if (c >= lo && c <= hi)
            hit = 1;
    }
    if (q >= pe) {
        *end = NULL;
        return 0;
    }
    *end = q + 1;
    return hit != neg;
}

/* '*' and '?' (and classes when |classes|): the greedy star with one
 * backtrack point, linear in practice and O(n*m) at worst. */
static int
glob(const char *p, size_t pn, const char *s, size_t sn, int classes)
{
    const char *pe = p + pn, *se = s + sn, *star = NULL, *ss = NULL;

    while (s < se) {
        const char *next;
        unsigned char c = lower((unsigned char)*s);
        if (p < pe && *p == '*') {
            star = ++p;
            ss = s;
            continue;
        }
        if (p < pe && classes && *p == '[') {
            int hit = in_class(p + 1, pe, c, &next);
            if (next != NULL && hit) {
                p = next;
                s++;
                continue;
            }
            if (next != NULL)
                goto backtrack;
            /* unclosed: a literal '[' below */
        }
        if (p < pe && (*p == '?' || (unsigned char)*p == c)) {
            p++;
            s++;
            continue;
        }
    backtrack:
        if (star == NULL)
            return 0;
        p = star;
        s = ++ss;
    }
    while (p < pe && *p == '*')
        p++;
    return p == pe;
}

static int
same(const char *p, const char *s, size_t pl, size_t sl)
{
    if (pl != sl)
        return 0;
    for (size_t i = 0; i < pl; i++)
        if ((unsigned char)p[i] != lower((unsigned char)s[i]))
            return 0;
    return 1;
}

/* Clash domain '*': one whole, non-empty label; other labels compare as
 * they are. */
static int
labels(const char *p, size_t pn, const char *s, size_t sn)
{
    const char *pe = p + pn, *se = s + sn;

    while (p < pe && s < se) {
        const char *pd = memchr(p, '.', (size_t)(pe - p)), *sd = memchr(s, '.', (size_t)(se - s));
        size_t pl = (size_t)((pd ? pd : pe) - p), sl = (size_t)((sd ? sd : se) - s);
        if (!(pl == 1 && *p == '*') && !same(p, s, pl, sl))
            return 0;
        if (sl == 0 || (pd == NULL) != (sd == NULL))
            return 0;
        p += pl + (pd != NULL);
        s += sl + (sd != NULL);
    }
    return p == pe && s == se;
}

int
rules_wildcards_match(const struct rules_wildcards *w, const char *host, size_t len,
                      uint32_t *tag)
{
    if (w == NULL || w->n == 0 || host == NULL)
        return 0;
    if (len > 0 && host[len - 1] == '.')
        len--;
    if (len == 0 || len > HOST_MAX)
        return 0;
    for (size_t i = 0; i < w->n; i++) {
        const struct wild *x = &w->w[i];
        int hit = x->kind == RULES_WILD_LABEL
                      ? labels(x->pat, x->len, host, len)
                      : glob(x->pat, x->len, host, len, x->kind == RULES_WILD_SURGE);
        if (hit) {
            if (tag != NULL)
                *tag = x->tag;
            return 1;
        }
    }
    return 0;
}
