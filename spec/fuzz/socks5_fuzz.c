#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>

#include "inbound/socks5.h"
#include "fuzz.h"

/* The common result contract, plus the split-point rule: a complete message
 * must read as NEED_MORE at every shorter length. */
static void
check_result(int r, size_t n, int (*again)(const uint8_t *, size_t), const uint8_t *p)
{
    size_t k;

    CHECK(r == SOCKS5_NEED_MORE || r == SOCKS5_ERR_VERSION || r == SOCKS5_ERR_BAD || r > 0);
    if (r <= 0)
        return;
    CHECK((size_t)r <= n);
    for (k = 0; k < (size_t)r; k++)
        CHECK(again(p, k) == SOCKS5_NEED_MORE);
}

static int
greet(const uint8_t *p, size_t n)
{
    uint8_t methods[32];

    return inbound_socks5_parse_greeting(p, n, methods);
}

static int
userpass(const uint8_t *p, size_t n)
{
    struct mem_slice user, pass;

    return inbound_socks5_parse_userpass(p, n, &user, &pass);
}

static int
request(const uint8_t *p, size_t n)
{
    struct flow_addr dst;
    uint8_t cmd, rep;

    return inbound_socks5_parse_request(p, n, &cmd, &dst, &rep);
}

static void
check_reply(uint8_t rep, const uint8_t *p, size_t n)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    uint8_t out[22];
    size_t len;

    memset(&ss, 0, sizeof(ss));
    memcpy(&ss, p, n < sizeof(ss) ? n : sizeof(ss));
    switch (n > 0 ? p[0] % 4 : 0) {
    case 0:
        len = inbound_socks5_write_reply(out, rep, NULL);
        CHECK(len == 10 && memcmp(out + 4, "\0\0\0\0\0\0", 6) == 0);
        break;
    case 1:
        ss.ss_family = AF_INET;
        len = inbound_socks5_write_reply(out, rep, (struct sockaddr *)&ss);
        CHECK(len == 10 && out[3] == 1);
        CHECK(memcmp(out + 4, &sin->sin_addr, 4) == 0 && memcmp(out + 8, &sin->sin_port, 2) == 0);
        break;
    case 2:
        ss.ss_family = AF_INET6;
        len = inbound_socks5_write_reply(out, rep, (struct sockaddr *)&ss);
        CHECK(len == 22 && out[3] == 4);
        CHECK(memcmp(out + 4, &sin6->sin6_addr, 16) == 0);
        CHECK(memcmp(out + 20, &sin6->sin6_port, 2) == 0);
        break;
    default:
        ss.ss_family = AF_UNIX;
        len = inbound_socks5_write_reply(out, rep, (struct sockaddr *)&ss);
        CHECK(len == 10);
        break;
    }
    CHECK(out[0] == 5 && out[1] == rep && out[2] == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data;
    size_t n = size;
    uint8_t methods[32], cmd = 0, rep = 0xee;
    struct mem_slice user, pass;
    struct flow_addr dst;
    int r;

    r = inbound_socks5_parse_greeting(p, n, methods);
    check_result(r, n, greet, p);
    if (r <= 0)
        goto reply;
    CHECK((methods[0] & 1) == (memchr(p + 2, 0, (size_t)r - 2) != NULL));
    p += r;
    n -= (size_t)r;

    if (methods[SOCKS5_METHOD_USERPASS >> 3] & (1u << (SOCKS5_METHOD_USERPASS & 7))) {
        r = inbound_socks5_parse_userpass(p, n, &user, &pass);
        check_result(r, n, userpass, p);
        if (r <= 0)
            goto reply;
        CHECK(user.len >= 1 && user.ptr == (const char *)p + 2);
        CHECK(pass.ptr == user.ptr + user.len + 1 && (size_t)r == 3 + user.len + pass.len);
        p += r;
        n -= (size_t)r;
    }

    r = inbound_socks5_parse_request(p, n, &cmd, &dst, &rep);
    check_result(r, n, request, p);
    if (r < 0)
        CHECK(rep == SOCKS5_REP_FAILURE || rep == SOCKS5_REP_ATYP_UNSUPPORTED);
    else
        CHECK(rep == SOCKS5_REP_OK);
    if (r > 0) {
        CHECK(cmd == p[1]);
        CHECK(dst.kind == FLOW_ADDR_IP4 || dst.kind == FLOW_ADDR_IP6 || dst.kind == FLOW_ADDR_NAME);
        if (dst.kind == FLOW_ADDR_NAME)
            CHECK(dst.name_len >= 1 && strlen(dst.name) == dst.name_len &&
                  memcmp(dst.name, p + 5, dst.name_len) == 0);
        CHECK(dst.port == (p[r - 2] << 8 | p[r - 1]));
        p += r;
        n -= (size_t)r;
    }

reply:
    check_reply(rep, p, n);
    return 0;
}
