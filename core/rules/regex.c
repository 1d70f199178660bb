#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/re.h"
#include "rules/rules.h"

#define HOST_MAX 253

/* Patterns on PCRE2 (rules/re.h): the Perl/ICU syntax Surge lists and the
 * RE2 syntax mihomo lists write (\d, \w, (?i), {m,n}) both parse, JIT
 * compiled and run under re.h's match limits. Kept in tag order, so the
 * first pattern that matches has the smallest tag. */
struct pattern {
    struct rules_re *re;
    uint32_t tag;
};

struct rules_regexes {
    struct pattern *p;
    size_t n, cap;
    uint64_t cut; /* matches the limits stopped (counted as no match) */
};

struct rules_regexes *
rules_regexes_new(void)
{
    return calloc(1, sizeof(struct rules_regexes));
}

void
rules_regexes_free(struct rules_regexes *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->n; i++)
        rules_re_free(r->p[i].re);
    free(r->p);
    free(r);
}

static void
set_err(char *err, size_t errlen, const char *msg)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s", msg);
}

int
rules_regexes_add(struct rules_regexes *r, const char *pattern, uint32_t tag, char *err,
                  size_t errlen)
{
    char msg[200];

    if (r == NULL || pattern == NULL) {
        set_err(err, errlen, "no pattern");
        return -1;
    }
    if (r->n == r->cap) {
        size_t n = r->cap ? r->cap * 2 : 8;
        struct pattern *p = realloc(r->p, n * sizeof(*p));
        if (p == NULL) {
            set_err(err, errlen, "out of memory");
            return -1;
        }
        r->p = p;
        r->cap = n;
    }
    /* Host names compare case-insensitively everywhere in the rules. */
    struct rules_re *re = rules_re_new(pattern, strlen(pattern), RULES_RE_CASELESS, msg,
                                       sizeof(msg));
    if (re == NULL) {
        set_err(err, errlen, msg);
        return -1;
    }
    /* Rules usually arrive in tag order: this is an append. */
    size_t i = r->n;
    while (i > 0 && r->p[i - 1].tag > tag) {
        r->p[i] = r->p[i - 1];
        i--;
    }
    r->p[i] = (struct pattern){re, tag};
    r->n++;
    return 0;
}

size_t
rules_regexes_count(const struct rules_regexes *r)
{
    return r != NULL ? r->n : 0;
}

uint64_t
rules_regexes_cut(const struct rules_regexes *r)
{
    return r != NULL ? r->cut : 0;
}

int
rules_regexes_match(const struct rules_regexes *r, const char *host, size_t len, uint32_t *tag)
{
    if (r == NULL || r->n == 0 || host == NULL)
        return 0;
    if (len > 0 && host[len - 1] == '.') /* the root dot the domain sets ignore too */
        len--;
    if (len == 0 || len > HOST_MAX)
        return 0;
    for (size_t i = 0; i < r->n; i++) {
        int rc = rules_re_match(r->p[i].re, host, len, NULL, 0);
        if (rc == RULES_RE_LIMIT)
            ((struct rules_regexes *)r)->cut++; /* a counter, not the set's meaning */
        if (rc > 0) {
            if (tag != NULL)
                *tag = r->p[i].tag;
            return 1;
        }
    }
    return 0;
}
