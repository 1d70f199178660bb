/* Rule-list parsers on arbitrary bytes. The first byte picks the format
 * (AUTO included), skip_invalid and when the callback stops the parse; the
 * rest is the file. Every entry is checked against the contract in
 * rules/list.h, and the parse is repeated with the other skip_invalid and
 * with the detected format to check that they agree. */

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rules/list.h"
#include "fuzz.h"

#define STOPPED 5

struct run {
    const char *buf;
    size_t len;
    unsigned lines; /* an upper bound: every CR and LF ends one */
    unsigned last_line;
    enum rules_type last_type;
    size_t n, stop_at;
};

static int
is_port(enum rules_type t)
{
    return t == RULES_T_DST_PORT || t == RULES_T_SRC_PORT || t == RULES_T_IN_PORT;
}

static int
is_cidr(enum rules_type t)
{
    return t == RULES_T_IP_CIDR || t == RULES_T_SRC_IP_CIDR;
}

static void
check_cidr(const struct rules_entry *e)
{
    char a[64];
    uint8_t addr[16] = {0};
    const char *slash = memchr(e->value.ptr, '/', e->value.len);
    size_t alen = slash ? (size_t)(slash - e->value.ptr) : e->value.len;

    CHECK(e->family == AF_INET || e->family == AF_INET6);
    CHECK(e->prefix <= (e->family == AF_INET ? 32 : 128));
    if (e->family == AF_INET) {
        static const uint8_t zero[12];
        CHECK(memcmp(e->addr + 4, zero, sizeof(zero)) == 0);
    }
    /* The parsed address is the one the value spells. */
    CHECK(alen < sizeof(a));
    memcpy(a, e->value.ptr, alen);
    a[alen] = '\0';
    CHECK(inet_pton(e->family, a, addr) == 1);
    CHECK(memcmp(addr, e->addr, sizeof(addr)) == 0);
    if (slash == NULL)
        CHECK(e->prefix == (e->family == AF_INET ? 32 : 128));
}

static int
entry(void *arg, const struct rules_entry *e)
{
    struct run *r = arg;
    size_t i;

    CHECK((unsigned)e->type < RULES_T_TYPE_COUNT);
    CHECK(rules_type_name(e->type) != NULL && strcmp(rules_type_name(e->type), "?") != 0);
    CHECK(e->value.len > 0);
    CHECK(e->value.ptr >= r->buf && e->value.ptr + e->value.len <= r->buf + r->len);
    for (i = 0; i < e->value.len; i++)
        CHECK(e->value.ptr[i] != '\n' && e->value.ptr[i] != '\r' && e->value.ptr[i] != '\0');
    /* Lines only go forward; one line gives several entries only for a
     * port list ("80/443") or in a YAML flow list ("payload: [a, b]"). */
    CHECK(e->line >= 1 && e->line <= r->lines);
    CHECK(e->line >= r->last_line);
    if (e->line == r->last_line)
        CHECK((is_port(e->type) && is_port(r->last_type)) ||
              memchr(r->buf, '[', r->len) != NULL);
    r->last_line = e->line;
    r->last_type = e->type;

    CHECK((e->options & ~(unsigned)RULES_OPT_NO_RESOLVE) == 0);
    if (e->options & RULES_OPT_NO_RESOLVE)
        CHECK(is_cidr(e->type) || e->type == RULES_T_GEOIP || e->type == RULES_T_IP_ASN ||
              e->type == RULES_T_SRC_GEOIP || e->type == RULES_T_SRC_IP_ASN);
    if (is_cidr(e->type))
        check_cidr(e);
    else
        CHECK(e->family == 0 && e->prefix == 0);
    if (is_port(e->type))
        CHECK(e->port_lo <= e->port_hi);
    else
        CHECK(e->port_lo == 0 && e->port_hi == 0);
    if (e->type == RULES_T_UNSUPPORTED)
        CHECK(e->options == 0 && memchr(e->value.ptr, ',', e->value.len) == NULL);
    if (e->type == RULES_T_NETWORK)
        CHECK(e->value.len == 3 && (strncasecmp(e->value.ptr, "tcp", 3) == 0 ||
                                    strncasecmp(e->value.ptr, "udp", 3) == 0));
    if (e->type == RULES_T_DOMAIN || e->type == RULES_T_DOMAIN_SUFFIX || e->type == RULES_T_DOMAIN_SUBS)
        CHECK(e->value.len <= 254 && e->value.ptr[0] != '.');

    r->n++;
    return r->n == r->stop_at ? STOPPED : 0;
}

static int
run(struct run *r, enum rules_format fmt, int skip, size_t *skipped, struct rules_list_error *err)
{
    int ret;

    r->n = 0;
    r->last_line = 0;
    r->last_type = RULES_T_TYPE_COUNT;
    ret = rules_list_parse(r->buf, r->len, fmt, skip, entry, r, skipped, err);
    CHECK(memchr(err->msg, '\0', sizeof(err->msg)) != NULL);
    if (ret == STOPPED) {
        CHECK(r->stop_at > 0 && r->n == r->stop_at);
        return ret;
    }
    CHECK(ret == 0 || ret == RULES_LIST_ERR_LINE || ret == RULES_LIST_ERR_FORMAT ||
          ret == RULES_LIST_ERR_AMBIGUOUS);
    if (ret == RULES_LIST_ERR_LINE) {
        CHECK(!skip);
        CHECK(err->line >= 1 && err->line <= r->lines && err->msg[0] != '\0');
    }
    if (ret == RULES_LIST_ERR_FORMAT || ret == RULES_LIST_ERR_AMBIGUOUS)
        CHECK(fmt == RULES_FORMAT_AUTO && err->line == 0 && err->msg[0] != '\0');
    /* A list Surge and Clash read differently is refused before any entry. */
    if (ret == RULES_LIST_ERR_AMBIGUOUS)
        CHECK(r->n == 0 && rules_list_ambiguous(r->buf, r->len));

    if (ret == 0 && skip && *skipped > 0)
        CHECK(err->line >= 1 && err->line <= r->lines);
    if (ret == 0 && !skip)
        CHECK(*skipped == 0 && err->line == 0);
    return ret;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rules_list_error err, err2;
    enum rules_format fmt, found;
    struct run r;
    size_t skipped, skipped2, n, i;
    char *buf;
    int ret, ret2, skip;

    if (size == 0)
        return 0;
    fmt = (enum rules_format)(data[0] % 6);
    skip = (data[0] >> 3) & 1;
    /* An exact-size copy, so that reading past the end trips ASan. */
    buf = malloc(size - 1 ? size - 1 : 1);
    CHECK(buf != NULL);
    memcpy(buf, data + 1, size - 1);

    memset(&r, 0, sizeof(r));
    r.buf = buf;
    r.len = size - 1;
    r.lines = 1;
    for (i = 0; i < r.len; i++)
        r.lines += buf[i] == '\n' || buf[i] == '\r';
    r.stop_at = data[0] >> 4 == 15 ? 2 : 0;

    found = rules_list_detect(buf, r.len);
    CHECK((unsigned)found <= RULES_FORMAT_CLASH_IPCIDR);

    ret = run(&r, fmt, skip, &skipped, &err);
    n = r.n;
    if (ret == STOPPED)
        goto done;

    /* skip_invalid only adds entries: a clean strict parse equals the
     * lenient one, and a lenient parse never delivers fewer entries. */
    ret2 = run(&r, fmt, !skip, &skipped2, &err2);
    if (ret2 != STOPPED) {
        if (!skip && ret == 0)
            CHECK(ret2 == 0 && skipped2 == 0 && r.n == n);
        if (skip && ret2 == 0)
            CHECK(skipped == 0 && r.n == n);
        if (skip && ret2 == RULES_LIST_ERR_LINE)
            CHECK(skipped > 0 && err2.line == err.line && strcmp(err.msg, err2.msg) == 0);
        if (ret == RULES_LIST_ERR_FORMAT || ret == RULES_LIST_ERR_AMBIGUOUS)
            CHECK(ret2 == ret);
    }

    /* AUTO parses exactly as the format it detects. */
    if (fmt == RULES_FORMAT_AUTO && found != RULES_FORMAT_AUTO) {
        ret2 = run(&r, found, skip, &skipped2, &err2);
        CHECK(ret2 == ret && r.n == n && skipped2 == skipped && err2.line == err.line);
    }
    if (fmt == RULES_FORMAT_AUTO && found == RULES_FORMAT_AUTO)
        CHECK(n == 0 && (ret == 0 || ret == RULES_LIST_ERR_FORMAT ||
                         ret == RULES_LIST_ERR_AMBIGUOUS));
    if (rules_list_ambiguous(buf, r.len))
        CHECK(found == RULES_FORMAT_AUTO);
done:
    free(buf);
    return 0;
}
