#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rules/rules.h"

#define EXACT RULES_DOMAIN_EXACT
#define SUFFIX RULES_DOMAIN_SUFFIX
#define KEYWORD RULES_DOMAIN_KEYWORD

static int
add(struct rules_domains *d, enum rules_domain_kind kind, const char *name, uint32_t tag)
{
    return rules_domains_add(d, kind, name, strlen(name), tag);
}

/* The matched tag, or -1 for no match. */
static long
match(const struct rules_domains *d, const char *host)
{
    uint32_t tag = 12345;
    if (!rules_domains_match(d, host, strlen(host), &tag))
        return -1;
    return tag;
}

static void
test_exact_and_suffix(void **state)
{
    (void)state;
    struct rules_domains *d = rules_domains_new();
    assert_int_equal(add(d, EXACT, "exact.test", 1), 0);
    assert_int_equal(add(d, SUFFIX, "example.com", 2), 0);
    assert_int_equal(rules_domains_build(d), 0);
    assert_int_equal(match(d, "exact.test"), 1);
    assert_int_equal(match(d, "a.exact.test"), -1);
    assert_int_equal(match(d, "xexact.test"), -1);
    assert_int_equal(match(d, "example.com"), 2);
    assert_int_equal(match(d, "a.example.com"), 2);
    assert_int_equal(match(d, "a.b.c.example.com"), 2);
    /* Suffixes hold on label boundaries only. */
    assert_int_equal(match(d, "badexample.com"), -1);
    assert_int_equal(match(d, "a.badexample.com"), -1);
    assert_int_equal(match(d, "example.com.evil"), -1);
    assert_int_equal(match(d, "com"), -1);
    assert_int_equal(match(d, ""), -1);
    assert_int_equal(rules_domains_count(d), 2);
    assert_true(rules_domains_memory(d) > 0);
    rules_domains_free(d);
}

static void
test_case_and_root_dot(void **state)
{
    (void)state;
    struct rules_domains *d = rules_domains_new();
    assert_int_equal(add(d, SUFFIX, "ExAmple.COM.", 3), 0);
    assert_int_equal(add(d, EXACT, "Host.Test", 4), 0);
    assert_int_equal(add(d, KEYWORD, "GooGle", 5), 0);
    assert_int_equal(rules_domains_build(d), 0);
    assert_int_equal(match(d, "example.com"), 3);
    assert_int_equal(match(d, "WWW.EXAMPLE.COM"), 3);
    assert_int_equal(match(d, "www.example.com."), 3);
    assert_int_equal(match(d, "HOST.test."), 4);
    assert_int_equal(match(d, "mail.GOOGLE.de"), 5);
    /* Only one root dot is ignored: "com." is no label of "example.com..". */
    assert_int_equal(match(d, "example.com.."), -1);
    assert_int_equal(match(d, "."), -1);
    rules_domains_free(d);
}

static void
test_exact_with_suffix_and_smallest_tag(void **state)
{
    (void)state;
    struct rules_domains *d = rules_domains_new();
    /* The same name as an exact entry (tag 7) and a suffix entry (tag 9). */
    assert_int_equal(add(d, EXACT, "a.test", 7), 0);
    assert_int_equal(add(d, SUFFIX, "a.test", 9), 0);
    /* A shorter suffix with a smaller tag wins over the longer name. */
    assert_int_equal(add(d, SUFFIX, "b.test", 20), 0);
    assert_int_equal(add(d, SUFFIX, "x.b.test", 30), 0);
    assert_int_equal(add(d, SUFFIX, "y.c.test", 3), 0);
    assert_int_equal(add(d, SUFFIX, "c.test", 40), 0);
    /* Duplicates keep the smallest tag whatever the order. */
    assert_int_equal(add(d, SUFFIX, "dup.test", 50), 0);
    assert_int_equal(add(d, SUFFIX, "DUP.test", 11), 0);
    assert_int_equal(add(d, SUFFIX, "dup.test", 60), 0);
    assert_int_equal(add(d, KEYWORD, "zzz", 1), 0);
    assert_int_equal(rules_domains_build(d), 0);
    assert_int_equal(match(d, "a.test"), 7);
    assert_int_equal(match(d, "sub.a.test"), 9);
    assert_int_equal(match(d, "x.b.test"), 20);
    assert_int_equal(match(d, "q.x.b.test"), 20);
    assert_int_equal(match(d, "y.c.test"), 3);
    assert_int_equal(match(d, "q.y.c.test"), 3);
    assert_int_equal(match(d, "q.c.test"), 40);
    assert_int_equal(match(d, "dup.test"), 11);
    /* A keyword with a smaller tag beats every name. */
    assert_int_equal(match(d, "zzz.a.test"), 1);
    assert_int_equal(match(d, "a.zzz.test"), 1);
    rules_domains_free(d);
}

static void
test_keywords_few_and_many(void **state)
{
    (void)state;
    struct rules_domains *few = rules_domains_new();
    assert_int_equal(add(few, KEYWORD, "ads", 4), 0);
    assert_int_equal(add(few, KEYWORD, "track", 2), 0);
    assert_int_equal(add(few, KEYWORD, "-cdn.", 6), 0);
    assert_int_equal(rules_domains_build(few), 0);
    assert_int_equal(match(few, "ads.example.com"), 4);
    assert_int_equal(match(few, "myads.com"), 4);
    assert_int_equal(match(few, "trackads.com"), 2);
    assert_int_equal(match(few, "x-cdn.net"), 6);
    assert_int_equal(match(few, "x-cdnnet"), -1);
    assert_int_equal(match(few, "example.com"), -1);
    rules_domains_free(few);

    /* Enough keywords for the automaton: overlapping ones, one inside
     * another, one that is a suffix of another. */
    struct rules_domains *many = rules_domains_new();
    const char *kw[] = {"abc", "bcd", "b", "zzzz", "he", "she", "his", "hers", "usher", "q-1"};
    for (uint32_t i = 0; i < sizeof(kw) / sizeof(kw[0]); i++)
        assert_int_equal(add(many, KEYWORD, kw[i], 100 + i), 0);
    assert_int_equal(rules_domains_build(many), 0);
    assert_int_equal(match(many, "xabcx.com"), 100);
    assert_int_equal(match(many, "xbcdx.com"), 101);
    assert_int_equal(match(many, "xxbx.com"), 102);
    assert_int_equal(match(many, "ushers.org"), 104);
    assert_int_equal(match(many, "HIS.ORG"), 106);
    assert_int_equal(match(many, "zzzz"), 103);
    assert_int_equal(match(many, "zzz.q-1.net"), 109);
    assert_int_equal(match(many, "example.com"), -1);
    rules_domains_free(many);

    /* Every byte value as a keyword: bytes compare as themselves, 'A' as 'a'. */
    struct rules_domains *bytes = rules_domains_new();
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        assert_int_equal(rules_domains_add(bytes, KEYWORD, &c, 1, (uint32_t)(1000 - b)), 0);
    }
    assert_int_equal(rules_domains_build(bytes), 0);
    assert_int_equal(match(bytes, "a"), 1000 - 'a');
    assert_int_equal(match(bytes, "AAA"), 1000 - 'a');
    assert_int_equal(match(bytes, "\xff"), 1000 - 255);
    assert_int_equal(rules_domains_match(bytes, "b\0", 2, NULL), 1);
    rules_domains_free(bytes);
}

static void
test_long_names_sharing_a_head(void **state)
{
    (void)state;
    struct rules_domains *d = rules_domains_new();
    assert_int_equal(add(d, EXACT, "aaaaaaaaaaaaaaaaaaaa.example.com", 1), 0);
    assert_int_equal(add(d, SUFFIX, "aaaaaaaaaaaaaaaaaaab.example.com", 2), 0);
    assert_int_equal(add(d, SUFFIX, "aaaaaaaaaaaaaaaa", 3), 0);
    assert_int_equal(rules_domains_build(d), 0);
    assert_int_equal(match(d, "aaaaaaaaaaaaaaaaaaaa.example.com"), 1);
    assert_int_equal(match(d, "x.aaaaaaaaaaaaaaaaaaab.example.com"), 2);
    assert_int_equal(match(d, "aaaaaaaaaaaaaaaaaaac.example.com"), -1);
    assert_int_equal(match(d, "x.aaaaaaaaaaaaaaaaaaaa.example.com"), -1);
    assert_int_equal(match(d, "x.AAAAAAAAAAAAAAAA"), 3);
    assert_int_equal(match(d, "aaaaaaaaaaaaaaaaa"), -1);
    rules_domains_free(d);
}

static void
test_punycode_and_other_bytes(void **state)
{
    (void)state;
    struct rules_domains *d = rules_domains_new();
    assert_int_equal(add(d, SUFFIX, "xn--fiqs8s", 1), 0);           /* .中国 */
    assert_int_equal(add(d, EXACT, "xn--mnchen-3ya.de", 2), 0);     /* münchen.de */
    assert_int_equal(add(d, SUFFIX, "under_score.test", 3), 0);
    assert_int_equal(rules_domains_build(d), 0);
    assert_int_equal(match(d, "www.XN--FIQS8S"), 1);
    assert_int_equal(match(d, "xn--mnchen-3ya.de"), 2);
    assert_int_equal(match(d, "a.under_score.test"), 3);
    assert_int_equal(match(d, "a.under-score.test"), -1);
    rules_domains_free(d);
}

static void
test_invalid_names(void **state)
{
    (void)state;
    char name[300];
    struct rules_domains *d = rules_domains_new();
    assert_int_equal(add(d, EXACT, "", 1), -1);
    assert_int_equal(add(d, SUFFIX, ".", 1), -1);
    assert_int_equal(add(d, SUFFIX, "a..b", 1), -1);
    assert_int_equal(add(d, SUFFIX, ".a.b", 1), -1);
    assert_int_equal(add(d, SUFFIX, "a.b..", 1), -1);
    assert_int_equal(add(d, KEYWORD, "", 1), -1);
    assert_int_equal(rules_domains_add(d, EXACT, NULL, 3, 1), -1);
    assert_int_equal(rules_domains_add(d, (enum rules_domain_kind)7, "a.b", 3, 1), -1);
    /* 63-byte labels are fine, 64 are not. */
    memset(name, 'a', 64);
    strcpy(name + 64, ".com");
    assert_int_equal(add(d, SUFFIX, name, 1), -1);
    assert_int_equal(add(d, SUFFIX, name + 1, 1), 0);
    /* 253 bytes (with or without the root dot) are fine, 254 are not. */
    for (int i = 0; i < 253; i++)
        name[i] = i % 64 == 63 ? '.' : 'b';
    name[253] = '\0';
    assert_int_equal(add(d, SUFFIX, name, 2), 0);
    name[253] = '.';
    name[254] = '\0';
    assert_int_equal(add(d, SUFFIX, name, 2), 0);
    name[253] = 'b';
    assert_int_equal(add(d, SUFFIX, name, 2), -1);
    assert_int_equal(rules_domains_count(d), 3);
    assert_int_equal(rules_domains_build(d), 0);
    name[253] = '\0';
    assert_int_equal(match(d, name), 2);
    name[253] = 'b';
    assert_int_equal(match(d, name), -1); /* too long to be a host */
    rules_domains_free(d);
}

static void
test_lifecycle(void **state)
{
    (void)state;
    struct rules_domains *d = rules_domains_new();
    assert_int_equal(add(d, SUFFIX, "a.test", 1), 0);
    assert_int_equal(match(d, "a.test"), -1); /* not built yet */
    assert_int_equal(rules_domains_build(d), 0);
    assert_int_equal(rules_domains_build(d), -1);
    assert_int_equal(add(d, SUFFIX, "b.test", 2), -1);
    assert_int_equal(match(d, "b.test"), -1);
    assert_int_equal(match(d, "a.test"), 1);
    assert_int_equal(rules_domains_match(d, "a.test", 6, NULL), 1);
    rules_domains_free(d);

    struct rules_domains *empty = rules_domains_new();
    assert_int_equal(rules_domains_build(empty), 0);
    assert_int_equal(match(empty, "a.test"), -1);
    assert_int_equal(match(empty, "x"), -1);
    assert_int_equal(rules_domains_count(empty), 0);
    rules_domains_free(empty);
    rules_domains_free(NULL);
}

/* A naive reference: every entry against the host, smallest tag kept. */
struct ref {
    int kind;
    char name[128];
    uint32_t tag;
};

static long
ref_match(const struct ref *r, size_t n, const char *host)
{
    char h[300];
    size_t len = strlen(host);
    if (len > 0 && host[len - 1] == '.')
        len--;
    for (size_t i = 0; i < len; i++)
        h[i] = (char)(host[i] >= 'A' && host[i] <= 'Z' ? host[i] + 32 : host[i]);
    h[len] = '\0';
    long best = -1;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(r[i].name);
        int hit;
        if (r[i].kind == KEYWORD)
            hit = len > 0 && strstr(h, r[i].name) != NULL;
        else if (len == nl)
            hit = strcmp(h, r[i].name) == 0;
        else
            hit = r[i].kind == SUFFIX && len > nl && h[len - nl - 1] == '.' &&
                  strcmp(h + len - nl, r[i].name) == 0;
        if (hit && (best < 0 || r[i].tag < best))
            best = r[i].tag;
    }
    return best;
}

/* Labels from a tiny alphabet, so names share suffixes and queries hit;
 * one in eight is 9-20 bytes, for names past a slot's 16-byte head. */
static void
random_name(char *out, int minlabels, int maxlabels)
{
    int labels = minlabels + rand() % (maxlabels - minlabels + 1), o = 0;
    for (int l = 0; l < labels; l++) {
        if (l > 0)
            out[o++] = '.';
        int n = rand() % 8 ? 1 + rand() % 3 : 9 + rand() % 12;
        for (int i = 0; i < n; i++)
            out[o++] = "abcdAB"[rand() % 6];
    }
    out[o] = '\0';
}

static void
cross_check(int nentries, int nkeywords, int nqueries)
{
    struct ref *r = calloc(nentries + nkeywords, sizeof(*r));
    struct rules_domains *d = rules_domains_new();
    size_t n = 0;
    for (int i = 0; i < nentries + nkeywords; i++) {
        struct ref *e = &r[n];
        e->kind = i < nentries ? (rand() % 3 ? SUFFIX : EXACT) : KEYWORD;
        if (e->kind == KEYWORD) {
            int kl = 3 + rand() % 4;
            for (int j = 0; j < kl; j++)
                e->name[j] = "abcd.B"[rand() % 6];
            e->name[kl] = '\0';
        } else {
            random_name(e->name, 2, 4);
        }
        e->tag = (uint32_t)(rand() % (4 * (nentries + nkeywords)));
        char added[140];
        /* A root dot on names only: on a keyword it is one more byte. */
        snprintf(added, sizeof(added), "%s%s", e->name, e->kind == KEYWORD || rand() % 4 ? "" : ".");
        assert_int_equal(add(d, e->kind, added, e->tag), 0);
        for (char *p = e->name; *p; p++)
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
        n++;
    }
    assert_int_equal(rules_domains_build(d), 0);
    int hits = 0;
    for (int q = 0; q < nqueries; q++) {
        char host[300];
        if (q % 2) {
            random_name(host, 1, 5);
        } else {
            /* Labels before an entry (at times glued on without a dot),
             * or the entry alone. */
            const struct ref *e = &r[rand() % n];
            random_name(host, 1, 2);
            strcat(host, rand() % 4 ? "." : "");
            strcat(host, e->name);
            if (rand() % 4 == 0)
                memmove(host, host + strlen(host) - strlen(e->name), strlen(e->name) + 1);
        }
        if (rand() % 8 == 0)
            strcat(host, ".");
        long want = ref_match(r, n, host), got = match(d, host);
        if (want != got)
            fail_msg("host '%s': want %ld, got %ld", host, want, got);
        hits += got >= 0;
    }
    /* Both outcomes are exercised. */
    assert_true(hits > nqueries / 20 && hits < nqueries - nqueries / 20);
    rules_domains_free(d);
    free(r);
}

static void
test_random_cross_check(void **state)
{
    (void)state;
    srand(20240601);
    cross_check(300, 0, 20000);
    cross_check(3000, 4, 20000);  /* keywords matched one by one */
    cross_check(6000, 40, 20000); /* bloom filter and automaton */
    cross_check(200, 300, 20000);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_and_suffix),
        cmocka_unit_test(test_case_and_root_dot),
        cmocka_unit_test(test_exact_with_suffix_and_smallest_tag),
        cmocka_unit_test(test_keywords_few_and_many),
        cmocka_unit_test(test_long_names_sharing_a_head),
        cmocka_unit_test(test_punycode_and_other_bytes),
        cmocka_unit_test(test_invalid_names),
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_random_cross_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
