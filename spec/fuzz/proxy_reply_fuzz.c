#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "outbound/hs_wire.h"
#include "outbound/proxy.h"
#include "fuzz.h"

typedef int (*parse_fn)(const uint8_t *p, size_t n);

static uint8_t u8;
static int status;
static struct flow_addr addr;

static int
method(const uint8_t *p, size_t n)
{
    return outbound_hs_socks5_parse_method(p, n, &u8);
}

static int
auth(const uint8_t *p, size_t n)
{
    return outbound_hs_socks5_parse_auth(p, n, &u8);
}

static int
reply(const uint8_t *p, size_t n)
{
    return outbound_hs_socks5_parse_reply(p, n, &u8);
}

static int
head(const uint8_t *p, size_t n)
{
    return outbound_hs_http_parse_head(p, n, &status);
}

static int
addr_parse(const uint8_t *p, size_t n)
{
    return outbound_addr_parse(p, n, &addr);
}

/* The result contract and the split-point rule: a complete message reads as
 * "need more" at every shorter length. Long HTTP heads check every prefix
 * near both ends and a stride in between, to keep runs fast. */
static int
check(parse_fn f, const uint8_t *p, size_t n)
{
    int r = f(p, n);

    if (r <= 0)
        return r;
    CHECK((size_t)r <= n);
    for (size_t k = 0; k < (size_t)r; k++) {
        if (k > 64 && k + 64 < (size_t)r && k % 61 != 0)
            continue;
        CHECK(f(p, k) == 0);
    }
    /* Bytes after a complete message change nothing. */
    CHECK(f(p, (size_t)r) == r);
    return f(p, n);
}

/* A name built from the input must never break out of the request line or
 * the SOCKS5 address form. */
static void
check_builders(const uint8_t *p, size_t n)
{
    struct flow_addr a, b;
    uint8_t req[OUTBOUND_SOCKS5_REQUEST_MAX];
    char http[OUTBOUND_HTTP_REQUEST_MAX];
    size_t len = n < FLOW_NAME_MAX ? n : FLOW_NAME_MAX;

    if (flow_addr_from_host(&a, (const char *)p, len, (uint16_t)(n * 257)) != 0)
        return;
    int r = outbound_hs_socks5_request(req, sizeof(req), &a);
    CHECK(r > 3);
    CHECK(outbound_addr_parse(req + 3, (size_t)r - 3, &b) == r - 3);
    CHECK(b.kind == a.kind && b.port == a.port);
    if (a.kind == FLOW_ADDR_NAME)
        CHECK(b.name_len == a.name_len && memcmp(b.name, a.name, a.name_len) == 0);

    r = outbound_hs_http_request(http, sizeof(http), &a, "user", "pass");
    if (r < 0) {
        CHECK(a.kind == FLOW_ADDR_NAME);
        return;
    }
    int lines = 0;
    for (int i = 0; i < r; i++) {
        CHECK(http[i] != '\0');
        if (http[i] == '\n') {
            CHECK(i > 0 && http[i - 1] == '\r');
            lines++;
        }
        if (http[i] == '\r')
            CHECK(i + 1 < r && http[i + 1] == '\n');
    }
    CHECK(lines == 4);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int r;

    r = check(method, data, size);
    if (r > 0)
        CHECK(r == 2 && data[0] == 5 && u8 == data[1]);
    r = check(auth, data, size);
    if (r > 0)
        CHECK(r == 2 && u8 == data[1]);

    r = check(reply, data, size);
    if (size >= 2 && data[0] == 5)
        CHECK(u8 == data[1]);
    if (r > 0)
        CHECK(r >= 7 && data[0] == 5);

    r = check(head, data, size);
    if (r > 0) {
        CHECK(status >= 100 && status <= 599 && r <= OUTBOUND_HTTP_HEAD_MAX);
        CHECK(data[r - 1] == '\n' && memcmp(data, "HTTP/1.", 7) == 0);
    }

    r = check(addr_parse, data, size);
    if (r > 0) {
        uint8_t out[FLOW_NAME_MAX + 4];
        struct flow_addr a = addr;
        CHECK(outbound_addr_write(out, sizeof(out), &a) == r);
        CHECK(memcmp(out, data, (size_t)r) == 0);
    }

    /* The replies in the order a SOCKS5 client meets them. */
    size_t off = 0;
    if ((r = method(data, size)) > 0) {
        off += (size_t)r;
        if (u8 == OUTBOUND_SOCKS5_USERPASS && (r = check(auth, data + off, size - off)) > 0)
            off += (size_t)r;
        check(reply, data + off, size - off);
    }

    check_builders(data, size);
    return 0;
}
