/* Golden rule lists: each file under spec/fixtures/rules/ is parsed with
 * skip_invalid, as its own format and as AUTO, and the dump must equal its
 * .expected file byte for byte. CHUTE_GOLDEN_UPDATE=1 rewrites the .expected
 * files instead (review the diff before committing it).
 *
 * Dump: "format NAME" (what rules_list_detect says), then one line per entry
 * "LINE TYPE 'VALUE'" plus "inet|inet6 ADDR/PREFIX" for CIDRs, "LO-HI" for
 * ports and "no-resolve", then "result R skipped N" and, when lines were
 * skipped, "first-error LINE: MESSAGE". */

#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rules/list.h"

static const char *const format_names[] = {
    [RULES_FORMAT_AUTO] = "auto",
    [RULES_FORMAT_SURGE] = "surge",
    [RULES_FORMAT_DOMAIN_SET] = "domain-set",
    [RULES_FORMAT_CLASSICAL] = "classical",
    [RULES_FORMAT_CLASH_DOMAIN] = "domain",
    [RULES_FORMAT_CLASH_IPCIDR] = "ipcidr",
};

struct dump {
    char *buf;
    size_t len, cap;
};

static void __attribute__((format(printf, 2, 3)))
put(struct dump *d, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (d->buf == NULL) {
        d->cap = 256;
        d->buf = malloc(d->cap);
        assert_non_null(d->buf);
    }
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(d->buf + d->len, d->cap - d->len, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if ((size_t)n < d->cap - d->len)
            break;
        d->cap = (d->cap + (size_t)n) * 2;
        d->buf = realloc(d->buf, d->cap);
        assert_non_null(d->buf);
    }
    d->len += (size_t)n;
}

static int
dump_entry(void *arg, const struct rules_entry *e)
{
    struct dump *d = arg;
    char a[INET6_ADDRSTRLEN];

    put(d, "%u %s '%.*s'", e->line, rules_type_name(e->type), (int)e->value.len, e->value.ptr);
    if (e->type == RULES_T_IP_CIDR || e->type == RULES_T_SRC_IP_CIDR) {
        assert_non_null(inet_ntop(e->family, e->addr, a, sizeof(a)));
        put(d, " %s %s/%u", e->family == AF_INET ? "inet" : "inet6", a, e->prefix);
    }
    if (e->type == RULES_T_DST_PORT || e->type == RULES_T_SRC_PORT)
        put(d, " %u-%u", e->port_lo, e->port_hi);
    if (e->options & RULES_OPT_NO_RESOLVE)
        put(d, " no-resolve");
    put(d, "\n");
    return 0;
}

static void
dump_parse(struct dump *d, const char *buf, size_t len, enum rules_format fmt)
{
    struct rules_list_error err;
    size_t skipped;
    int r;

    d->len = 0;
    put(d, "format %s%s\n", format_names[rules_list_detect(buf, len)],
        rules_list_ambiguous(buf, len) ? " (ambiguous)" : "");
    r = rules_list_parse(buf, len, fmt, 1, dump_entry, d, &skipped, &err);
    put(d, "result %d skipped %zu\n", r, skipped);
    if (skipped > 0)
        put(d, "first-error %u: %s\n", err.line, err.msg);
}

/* The fixtures sit beside spec/unit/ whatever the build directory. */
static char *
fixture_path(const char *name)
{
    static char path[4096];
    const char *slash = strrchr(__FILE__, '/');
    int dir = slash ? (int)(slash - __FILE__) : 1;

    snprintf(path, sizeof(path), "%.*s/../../fixtures/rules/%s", dir, slash ? __FILE__ : ".", name);
    return path;
}

static char *
slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    if (f == NULL)
        fail_msg("cannot open %s", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void
golden(const char *name, enum rules_format fmt)
{
    struct dump got = {0}, autodump = {0};
    char want_name[256];
    char *input, *want;
    size_t input_len, want_len;
    FILE *f;

    input = slurp(fixture_path(name), &input_len);
    dump_parse(&got, input, input_len, fmt);
    dump_parse(&autodump, input, input_len, RULES_FORMAT_AUTO);
    snprintf(want_name, sizeof(want_name), "%s.expected", name);

    if (getenv("CHUTE_GOLDEN_UPDATE") != NULL) {
        f = fopen(fixture_path(want_name), "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(got.buf, 1, got.len, f), got.len);
        fclose(f);
    }
    want = slurp(fixture_path(want_name), &want_len);
    if (got.len != want_len || memcmp(got.buf, want, want_len) != 0)
        fail_msg("%s differs from %s; got:\n%.*s", name, want_name, (int)got.len, got.buf);
    /* Detection finds the format, so AUTO reads the file the same way;
     * a text domain list with ".a.com" lines is ambiguous (Surge and Clash
     * read them differently) and AUTO refuses it. */
    if (rules_list_ambiguous(input, input_len)) {
        assert_int_equal(rules_list_parse(input, input_len, RULES_FORMAT_AUTO, 1, NULL, NULL,
                                          NULL, NULL),
                         RULES_LIST_ERR_AMBIGUOUS);
    } else if (autodump.len != got.len || memcmp(autodump.buf, got.buf, got.len) != 0)
        fail_msg("%s as AUTO differs; got:\n%.*s", name, (int)autodump.len, autodump.buf);
    free(input);
    free(want);
    free(got.buf);
    free(autodump.buf);
}

static void
test_surge_list(void **state)
{
    (void)state;
    golden("surge.list", RULES_FORMAT_SURGE);
}

static void
test_domain_set(void **state)
{
    (void)state;
    golden("domain-set.txt", RULES_FORMAT_DOMAIN_SET);
}

static void
test_classical_yaml(void **state)
{
    (void)state;
    golden("classical.yaml", RULES_FORMAT_CLASSICAL);
}

static void
test_classical_text(void **state)
{
    (void)state;
    golden("classical.txt", RULES_FORMAT_CLASSICAL);
}

static void
test_domain_yaml(void **state)
{
    (void)state;
    golden("domain.yaml", RULES_FORMAT_CLASH_DOMAIN);
}

static void
test_domain_text(void **state)
{
    (void)state;
    golden("domain.txt", RULES_FORMAT_CLASH_DOMAIN);
}

static void
test_ipcidr_yaml(void **state)
{
    (void)state;
    golden("ipcidr.yaml", RULES_FORMAT_CLASH_IPCIDR);
}

static void
test_ipcidr_text(void **state)
{
    (void)state;
    golden("ipcidr.txt", RULES_FORMAT_CLASH_IPCIDR);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_surge_list),     cmocka_unit_test(test_domain_set),
        cmocka_unit_test(test_classical_yaml), cmocka_unit_test(test_classical_text),
        cmocka_unit_test(test_domain_yaml),    cmocka_unit_test(test_domain_text),
        cmocka_unit_test(test_ipcidr_yaml),    cmocka_unit_test(test_ipcidr_text),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
