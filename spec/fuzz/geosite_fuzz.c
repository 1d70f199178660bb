/* The geosite.dat decoder on arbitrary bytes. The first byte picks which
 * of a few site names are wanted (with and without @attributes) and when
 * the callback stops the read; the rest is the file. Every domain handed
 * over must lie inside the buffer, be non-empty and of a known kind; the
 * counts must agree with the callbacks; an error must name an offset
 * within the file; and a second read gives the same result. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rules/geosite.h"
#include "fuzz.h"

static const char *const names[] = {"cn", "google@ads", "a", "ads@cn@x", "geolocation-!cn",
                                    "b@c", "x", "test"};
#define NNAMES (sizeof(names) / sizeof(names[0]))

struct run {
    const uint8_t *buf;
    size_t len, nwants, calls, stop_at;
    size_t per_want[NNAMES];
};

static int
on_domain(void *arg, size_t want, enum rules_geosite_kind kind, struct mem_slice v)
{
    struct run *r = arg;
    CHECK(want < r->nwants);
    CHECK((unsigned)kind <= RULES_GEOSITE_FULL);
    CHECK(v.len > 0);
    CHECK((const uint8_t *)v.ptr >= r->buf && (const uint8_t *)v.ptr + v.len <= r->buf + r->len);
    r->per_want[want]++;
    return ++r->calls == r->stop_at ? 3 : 0;
}

static int
read_once(struct run *r, struct rules_geosite_want *w, struct rules_geosite_error *err,
          size_t *total)
{
    memset(r->per_want, 0, sizeof(r->per_want));
    r->calls = 0;
    return rules_geosite_read(r->buf, r->len, w, r->nwants, on_domain, r, total, err);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rules_geosite_want w[NNAMES], w2[NNAMES];
    struct rules_geosite_error err, err2;
    struct run r = {0};
    size_t total = 0, total2 = 0;
    char msg[160];

    if (size == 0)
        return 0;
    for (size_t i = 0; i < NNAMES; i++)
        if (data[0] & (1u << i)) {
            CHECK(rules_geosite_want_parse(mem_slice(names[i], strlen(names[i])), &w[r.nwants],
                                           msg, sizeof(msg)) == 0);
            r.nwants++;
        }
    r.stop_at = (data[0] & 0x81) == 0x81 ? 2 : 0;
    /* An exact-size copy, so that reading past the end trips ASan. */
    uint8_t *buf = malloc(size - 1 ? size - 1 : 1);
    CHECK(buf != NULL);
    memcpy(buf, data + 1, size - 1);
    r.buf = buf;
    r.len = size - 1;

    int rc = read_once(&r, w, &err, &total);
    CHECK(rc == 0 || rc == 3 || rc == RULES_GEOSITE_ERR_FORMAT);
    if (rc == RULES_GEOSITE_ERR_FORMAT) {
        CHECK(err.offset <= r.len && err.msg[0] != '\0');
        CHECK(memchr(err.msg, '\0', sizeof(err.msg)) != NULL);
    }
    if (rc == 3)
        CHECK(r.stop_at > 0 && r.calls == r.stop_at);
    if (rc == 0) {
        size_t sites = 0;
        for (size_t i = 0; i < r.nwants; i++) {
            CHECK(w[i].domains == r.per_want[i]);
            sites += w[i].sites;
        }
        (void)sites;
    }
    memcpy(w2, w, sizeof(w));
    size_t calls = r.calls;
    int rc2 = read_once(&r, w2, &err2, &total2);
    CHECK(rc2 == rc && r.calls == calls && total2 == total);
    if (rc == RULES_GEOSITE_ERR_FORMAT)
        CHECK(err2.offset == err.offset && strcmp(err2.msg, err.msg) == 0);
    free(buf);
    return 0;
}
