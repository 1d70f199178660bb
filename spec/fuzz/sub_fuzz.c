/* The subscription decoder (fetch/sub.c: Clash YAML on libyaml, base64,
 * URI lines) on arbitrary bytes: it returns a count >= 1 that equals the
 * proxies it handed over, or -1 with a message; every proxy has a type,
 * a server and a port; lines stay within the body. */

#include <stdint.h>
#include <string.h>

#include "fetch/sub.h"
#include "fuzz.h"

struct seen {
    long proxies, skips;
    unsigned max_line;
};

static void
on_proxy(void *arg, const struct outbound_uri *p, unsigned line)
{
    struct seen *s = arg;
    CHECK(p->type[0] != '\0' && p->server[0] != '\0' && p->port >= 1);
    CHECK(memchr(p->name, '\0', sizeof(p->name)) != NULL);
    s->proxies++;
    if (line > s->max_line)
        s->max_line = line;
}

static void
on_skip(void *arg, unsigned line, const char *why)
{
    struct seen *s = arg;
    CHECK(why != NULL && why[0] != '\0');
    s->skips++;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct seen s = {0};
    const struct fetch_sub_ops ops = {on_proxy, on_skip};
    char err[300];
    enum fetch_sub_format fmt;
    long n = fetch_sub_decode((const char *)data, size, &ops, &s, &fmt, err, sizeof(err));
    if (n >= 0) {
        CHECK(n >= 1 && n == s.proxies);
        CHECK(fmt == FETCH_SUB_CLASH || fmt == FETCH_SUB_BASE64 || fmt == FETCH_SUB_LINES);
        CHECK(s.max_line <= size + 1);
    } else {
        CHECK(n == -1);
        CHECK(err[0] != '\0' && memchr(err, '\0', sizeof(err)) != NULL);
    }
    return 0;
}
