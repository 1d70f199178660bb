#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/rules.h"

#define HOST_MAX 253

/* Each compiled pattern has its own allocation: POSIX does not promise a
 * regex_t survives being moved, and the list is kept in tag order by
 * moving pointers, so the first pattern that matches has the smallest tag. */
struct pattern {
    regex_t re;
    uint32_t tag;
};

struct rules_regexes {
    struct pattern **p;
    size_t n, cap;
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
    for (size_t i = 0; i < r->n; i++) {
        regfree(&r->p[i]->re);
        free(r->p[i]);
    }
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
    if (r == NULL || pattern == NULL) {
        set_err(err, errlen, "no pattern");
        return -1;
    }
    if (r->n == r->cap) {
        size_t n = r->cap ? r->cap * 2 : 8;
        struct pattern **p = realloc(r->p, n * sizeof(*p));
        if (p == NULL) {
            set_err(err, errlen, "out of memory");
            return -1;
        }
        r->p = p;
        r->cap = n;
    }
    struct pattern *pt = malloc(sizeof(*pt));
    if (pt == NULL) {
        set_err(err, errlen, "out of memory");
        return -1;
    }
    int rc = regcomp(&pt->re, pattern, REG_EXTENDED | REG_ICASE | REG_NOSUB);
    if (rc != 0) {
        if (err != NULL && errlen > 0)
            regerror(rc, &pt->re, err, errlen);
        free(pt);
        return -1;
    }
    pt->tag = tag;
    /* Rules usually arrive in tag order: this is an append. */
    size_t i = r->n;
    while (i > 0 && r->p[i - 1]->tag > tag) {
        r->p[i] = r->p[i - 1];
        i--;
    }
    r->p[i] = pt;
    r->n++;
    return 0;
}

int
rules_regexes_match(const struct rules_regexes *r, const char *host, size_t len, uint32_t *tag)
{
    /* regexec wants a C string: the host is copied, without the root dot
     * the domain sets ignore too. */
    char buf[HOST_MAX + 3];
    if (r == NULL || r->n == 0 || host == NULL)
        return 0;
    if (len > 0 && host[len - 1] == '.')
        len--;
    if (len == 0 || len > HOST_MAX)
        return 0;
    memcpy(buf, host, len);
    buf[len] = '\0';
    for (size_t i = 0; i < r->n; i++)
        if (regexec(&r->p[i]->re, buf, 0, NULL, 0) == 0) {
            if (tag != NULL)
                *tag = r->p[i]->tag;
            return 1;
        }
    return 0;
}
