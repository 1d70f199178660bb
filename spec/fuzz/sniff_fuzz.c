/* libFuzzer target for core/flow/sniff_*.c: both sniffers see the input
 * whole and as it would arrive, prefix after prefix, each prefix in a heap
 * block of its own size so ASan flags a read past |len|. A TLS input whose
 * first record is whole is also re-cut into smaller records, which must not
 * change the answer. Invariants are checked with abort() so they hold in
 * every build, NDEBUG or not. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "flow/sniff.h"
#include "fuzz.h"

#define OUTLEN 256

struct answer {
    int r, h2;
    char name[OUTLEN];
};

/* A name is what both sniffers promise: lowercase, no separators but the
 * IPv6 colons the HTTP one may keep, never longer than a host name. */
static void
check_name(const char *s, int r, int tls)
{
    CHECK(r <= 253 && strlen(s) == (size_t)r);
    for (int i = 0; i < r; i++) {
        char c = s[i];

        CHECK((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
              c == '_' || (!tls && c == ':'));
    }
}

static struct answer
sniff(int tls, const uint8_t *p, size_t len, size_t outlen)
{
    struct answer a = {.h2 = -1};
    uint8_t *c = malloc(len > 0 ? len : 1);
    char *out = malloc(outlen);

    CHECK(c != NULL && out != NULL);
    memcpy(c, p, len);
    a.r = tls ? flow_sniff_tls(c, len, out, outlen, &a.h2) : flow_sniff_http(c, len, out, outlen);
    CHECK(a.r == FLOW_SNIFF_NEED_MORE || a.r == FLOW_SNIFF_NONE || a.r > 0);
    if (a.r > 0) {
        CHECK((size_t)a.r < outlen);
        check_name(out, a.r, tls);
        memcpy(a.name, out, (size_t)a.r + 1);
    }
    if (tls)
        CHECK(a.h2 == 0 || (a.h2 == 1 && a.r != FLOW_SNIFF_NEED_MORE));
    if (!tls && len >= 8192)
        CHECK(a.r != FLOW_SNIFF_NEED_MORE);
    free(c);
    free(out);
    return a;
}

/* A prefix may ask for more; if it answers, more bytes keep that answer. */
static void
check_prefix(const struct answer *part, const struct answer *whole)
{
    if (part->r == FLOW_SNIFF_NEED_MORE)
        return;
    CHECK(part->r == whole->r);
    if (part->r > 0)
        CHECK(strcmp(part->name, whole->name) == 0 && part->h2 == whole->h2);
}

static void
check_same(const struct answer *a, const struct answer *b)
{
    CHECK(a->r == b->r && a->h2 == b->h2);
    if (a->r > 0)
        CHECK(strcmp(a->name, b->name) == 0);
}

/* The first record's payload in records of |frag| bytes, under the same
 * header bytes, then the rest of the input as it was. */
static void
check_recut(const uint8_t *data, size_t size, size_t frag, const struct answer *whole)
{
    size_t body = size >= 5 ? (size_t)data[3] << 8 | data[4] : 0, o = 0;
    struct answer a;
    uint8_t *buf;

    if (size < 5 || data[0] != 22 || data[1] != 3 || data[2] < 1 || data[2] > 4 || body == 0 ||
        body > 16384 || 5 + body > size)
        return;
    buf = malloc(size + 5 * body);
    CHECK(buf != NULL);
    for (size_t i = 0; i < body; i += frag) {
        size_t k = body - i < frag ? body - i : frag;

        memcpy(buf + o, data, 3);
        buf[o + 3] = (uint8_t)(k >> 8);
        buf[o + 4] = (uint8_t)k;
        memcpy(buf + o + 5, data + 5 + i, k);
        o += 5 + k;
    }
    memcpy(buf + o, data + 5 + body, size - 5 - body);
    a = sniff(1, buf, o + size - 5 - body, OUTLEN);
    check_same(&a, whole);
    free(buf);
}

static int
by_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;

    return (x > y) - (x < y);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t cut = size > 0 ? data[size - 1] : 0;
    size_t splits[] = {0, size > 0, cut % (size + 1), size / 3, size / 2, size - (size > 0)};

    qsort(splits, sizeof(splits) / sizeof(splits[0]), sizeof(splits[0]), by_size);

    for (int tls = 0; tls <= 1; tls++) {
        struct answer whole = sniff(tls, data, size, OUTLEN), small;
        size_t outlen = 1 + cut % 64;

        /* Prefixes in increasing order, as reads would bring them. */
        for (size_t i = 0; i < sizeof(splits) / sizeof(splits[0]); i++) {
            struct answer part = sniff(tls, data, splits[i], OUTLEN);

            check_prefix(&part, &whole);
        }
        /* A short |out| refuses a name it cannot hold (maybe before the
         * rest of the hello is in), and changes nothing else. */
        small = sniff(tls, data, size, outlen);
        if (small.r != FLOW_SNIFF_NONE || (whole.r > 0 && (size_t)whole.r < outlen))
            check_same(&small, &whole);
        if (tls)
            check_recut(data, size, 1 + cut % 97, &whole);
    }
    return 0;
}
