/* libFuzzer target for the health check's reading of a response
 * (core/outbound/health.c outbound_health_feed over hs_wire.c
 * outbound_hs_http_status): the bytes a checked path sends back, in pieces.
 *
 * Input: [pace][response...].
 *  - The response fed whole and fed in pieces of sizes from |pace| gives
 *    the same verdict; before the verdict every prefix reads "more
 *    needed", and no byte after the status line's first 13 changes it.
 *  - On any input the verdict agrees with a tiny reference written from
 *    RFC 9112 §4 (HTTP-version SP 3DIGIT, then SP or the line's end), and
 *    with the CONNECT reply parser's status when that one reads a head. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "outbound/hs_wire.h"
#include "outbound/set_int.h"
#include "fuzz.h"

/* 0: more needed, -1: not HTTP, else the status. */
static int
reference(const uint8_t *p, size_t n)
{
    static const char want[] = "HTTP/1.d sdde"; /* d: digit, s: 1-5, e: SP CR LF */
    for (size_t i = 0; i < 13; i++) {
        if (i >= n)
            return 0;
        uint8_t c = p[i];
        int ok;
        switch (want[i]) {
        case 'd':
            ok = c >= '0' && c <= '9';
            break;
        case 's':
            ok = c >= '1' && c <= '5';
            break;
        case 'e':
            ok = c == ' ' || c == '\r' || c == '\n';
            break;
        default:
            ok = c == (uint8_t)want[i];
        }
        if (!ok)
            return -1;
    }
    char code[4] = {(char)p[9], (char)p[10], (char)p[11], 0};
    return atoi(code);
}

/* The verdict on the first |n| bytes, read from a block of exactly that
 * size so ASan sees a read past them. */
static int
whole(const uint8_t *p, size_t n)
{
    uint8_t *copy = malloc(n ? n : 1);
    CHECK(copy != NULL);
    memcpy(copy, p, n);
    struct outbound_health_line l = {0};
    int r = outbound_health_feed(&l, copy, n);
    CHECK(l.got <= sizeof(l.b) && l.got == (n < sizeof(l.b) ? n : sizeof(l.b)));
    free(copy);
    return r;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    uint8_t pace = data[0];
    const uint8_t *p = data + 1;
    size_t n = size - 1;

    int r = whole(p, n);
    CHECK(r == -1 || r == 0 || (r >= 100 && r <= 599));
    CHECK(r == reference(p, n));
    CHECK(r == outbound_hs_http_status(p, n));

    /* Where the verdict falls: shorter reads need more, longer ones agree. */
    size_t at = 0;
    while (at <= n && whole(p, at) == 0)
        at++;
    if (r == 0)
        CHECK(at > n && n < OUTBOUND_HTTP_STATUS_LEN);
    else
        CHECK(at <= n && (r < 0 || at == OUTBOUND_HTTP_STATUS_LEN));
    for (size_t k = at; k <= n && k < at + 32; k++)
        CHECK(whole(p, k) == r);

    /* In pieces, as reads return them: the same verdict, reached at the
     * same byte, and it stays (the check finishes there). */
    struct outbound_health_line l = {0};
    size_t off = 0, step = 1 + (pace & 0x0f);
    int v = 0;
    while (off < n && v == 0) {
        size_t len = step < n - off ? step : n - off;
        v = outbound_health_feed(&l, p + off, len);
        off += len;
        step = 1 + ((step * 7 + pace) & 0x0f);
    }
    CHECK(v == r);
    if (v != 0)
        CHECK(off >= at && off - at < 16);

    /* The CONNECT reply parser reads the same status line the same way. */
    int status = -7;
    int h = outbound_hs_http_parse_head(p, n, &status);
    if (h > 0)
        CHECK(r > 0 && status == r);
    if (r < 0)
        CHECK(h < 0);
    return 0;
}
