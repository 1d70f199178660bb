#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <netinet/in.h>
#include <sys/un.h>

#include "inbound/socks5.h"

/* One signature for all three parsers, so the split-point and pipelining
 * checks run the same way over each message type. */
typedef int (*parse_fn)(const uint8_t *p, size_t n);

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
    uint8_t cmd, rep = 0xee;
    int r = inbound_socks5_parse_request(p, n, &cmd, &dst, &rep);

    if (r == SOCKS5_NEED_MORE)
        assert_int_equal(rep, SOCKS5_REP_OK);
    return r;
}

/* Every proper prefix is NEED_MORE, the whole message is consumed, and a
 * following message (pipelined) is left alone. Each prefix sits in a heap
 * block of its exact size, so a sanitizer build catches reads past n. */
static void
check_message(parse_fn parse, const uint8_t *msg, size_t len)
{
    uint8_t buf[600];
    size_t k;

    assert_true(len + 8 <= sizeof(buf));
    for (k = 0; k < len; k++) {
        uint8_t *prefix = malloc(k ? k : 1);

        assert_non_null(prefix);
        memcpy(prefix, msg, k);
        assert_int_equal(parse(prefix, k), SOCKS5_NEED_MORE);
        free(prefix);
    }
    assert_int_equal(parse(msg, len), (int)len);

    memcpy(buf, msg, len);
    memcpy(buf + len, "\x05\x01\x00\x01\x7f\x00\x00\x01", 8);
    assert_int_equal(parse(buf, len + 8), (int)len);
}

static int
has_method(const uint8_t methods[32], unsigned m)
{
    return (methods[m >> 3] >> (m & 7)) & 1;
}

static void
greeting_valid(void **state)
{
    static const uint8_t one[] = {5, 1, 0};
    static const uint8_t two[] = {5, 3, 0, 2, 0x80};
    uint8_t methods[32];

    (void)state;
    memset(methods, 0xff, sizeof(methods));
    assert_int_equal(inbound_socks5_parse_greeting(two, sizeof(two), methods), 5);
    assert_true(has_method(methods, SOCKS5_METHOD_NOAUTH));
    assert_true(has_method(methods, SOCKS5_METHOD_USERPASS));
    assert_true(has_method(methods, 0x80));
    assert_false(has_method(methods, 1));
    assert_false(has_method(methods, SOCKS5_METHOD_NONE));

    /* A reused array holds only the newest offer. */
    assert_int_equal(inbound_socks5_parse_greeting(one, sizeof(one), methods), 3);
    assert_true(has_method(methods, SOCKS5_METHOD_NOAUTH));
    assert_false(has_method(methods, SOCKS5_METHOD_USERPASS));

    check_message(greet, one, sizeof(one));
    check_message(greet, two, sizeof(two));
}

static void
greeting_invalid(void **state)
{
    (void)state;
    assert_int_equal(greet((const uint8_t *)"\x04", 1), SOCKS5_ERR_VERSION);
    assert_int_equal(greet((const uint8_t *)"\x04\x01\x00", 3), SOCKS5_ERR_VERSION);
    assert_int_equal(greet((const uint8_t *)"\x05\x00", 2), SOCKS5_ERR_BAD);
    assert_int_equal(greet((const uint8_t *)"\x05\x00\x00", 3), SOCKS5_ERR_BAD);
}

static void
userpass_valid(void **state)
{
    static const uint8_t msg[] = "\x01\x04user\x06secret";
    static const uint8_t nopass[] = {1, 1, 'u', 0};
    struct mem_slice user, pass;

    (void)state;
    assert_int_equal(inbound_socks5_parse_userpass(msg, sizeof(msg) - 1, &user, &pass), 13);
    assert_true(mem_slice_eq(user, MEM_SLICE_LIT("user")));
    assert_true(mem_slice_eq(pass, MEM_SLICE_LIT("secret")));
    assert_ptr_equal(user.ptr, (const char *)msg + 2);
    assert_ptr_equal(pass.ptr, (const char *)msg + 7);

    assert_int_equal(inbound_socks5_parse_userpass(nopass, sizeof(nopass), &user, &pass), 4);
    assert_int_equal(user.len, 1);
    assert_int_equal(pass.len, 0);

    check_message(userpass, msg, sizeof(msg) - 1);
    check_message(userpass, nopass, sizeof(nopass));
}

static void
userpass_invalid(void **state)
{
    (void)state;
    assert_int_equal(userpass((const uint8_t *)"\x05", 1), SOCKS5_ERR_VERSION);
    assert_int_equal(userpass((const uint8_t *)"\x00\x01u\x00", 4), SOCKS5_ERR_VERSION);
    assert_int_equal(userpass((const uint8_t *)"\x01\x00", 2), SOCKS5_ERR_BAD);
    assert_int_equal(userpass((const uint8_t *)"\x01\x00\x01p", 4), SOCKS5_ERR_BAD);
}

static void
request_ip4(void **state)
{
    static const uint8_t msg[] = {5, 1, 0, 1, 192, 0, 2, 7, 0x1f, 0x90};
    struct flow_addr dst;
    uint8_t cmd = 0, rep = 0xee;

    (void)state;
    assert_int_equal(inbound_socks5_parse_request(msg, sizeof(msg), &cmd, &dst, &rep), 10);
    assert_int_equal(cmd, SOCKS5_CMD_CONNECT);
    assert_int_equal(rep, SOCKS5_REP_OK);
    assert_int_equal(dst.kind, FLOW_ADDR_IP4);
    assert_int_equal(dst.port, 8080);
    assert_memory_equal(dst.ip, "\xc0\x00\x02\x07", 4);
    assert_int_equal(dst.name_len, 0);
    check_message(request, msg, sizeof(msg));
}

static void
request_ip6(void **state)
{
    static const uint8_t msg[] = {5, 3, 0, 4, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
                                  0, 0, 0, 0, 0, 0, 0, 1, 0x01, 0xbb};
    struct flow_addr dst;
    uint8_t cmd = 0, rep = 0xee;

    (void)state;
    assert_int_equal(inbound_socks5_parse_request(msg, sizeof(msg), &cmd, &dst, &rep), 22);
    assert_int_equal(cmd, SOCKS5_CMD_UDP_ASSOCIATE);
    assert_int_equal(dst.kind, FLOW_ADDR_IP6);
    assert_int_equal(dst.port, 443);
    assert_memory_equal(dst.ip, msg + 4, 16);
    check_message(request, msg, sizeof(msg));
}

static void
request_name(void **state)
{
    static const uint8_t msg[] = "\x05\x01\x00\x03\x0b" "example.com" "\x00\x50";
    uint8_t big[4 + 1 + 255 + 2];
    struct flow_addr dst;
    uint8_t cmd = 0, rep = 0xee;

    (void)state;
    assert_int_equal(inbound_socks5_parse_request(msg, sizeof(msg) - 1, &cmd, &dst, &rep), 18);
    assert_int_equal(dst.kind, FLOW_ADDR_NAME);
    assert_int_equal(dst.name_len, 11);
    assert_string_equal(dst.name, "example.com");
    assert_int_equal(dst.port, 80);
    check_message(request, msg, sizeof(msg) - 1);

    /* The longest name fills flow_addr.name and still ends in NUL. */
    memcpy(big, "\x05\x01\x00\x03\xff", 5);
    memset(big + 5, 'a', 255);
    memcpy(big + 260, "\x01\x00", 2);
    assert_int_equal(inbound_socks5_parse_request(big, sizeof(big), &cmd, &dst, &rep), 262);
    assert_int_equal(dst.name_len, 255);
    assert_int_equal(strlen(dst.name), 255);
    assert_int_equal(dst.port, 256);
    check_message(request, big, sizeof(big));
}

static void
request_cmd_passes_through(void **state)
{
    static const uint8_t msg[] = {5, 9, 0, 1, 10, 0, 0, 1, 0, 53};
    struct flow_addr dst;
    uint8_t cmd = 0, rep = 0xee;

    (void)state;
    assert_int_equal(inbound_socks5_parse_request(msg, sizeof(msg), &cmd, &dst, &rep), 10);
    assert_int_equal(cmd, 9);
    assert_int_equal(rep, SOCKS5_REP_OK);
}

static void
expect_request_error(const char *msg, size_t n, int err, uint8_t want_rep)
{
    struct flow_addr dst;
    uint8_t cmd, rep = 0xee;

    assert_int_equal(inbound_socks5_parse_request((const uint8_t *)msg, n, &cmd, &dst, &rep), err);
    assert_int_equal(rep, want_rep);
}

static void
request_invalid(void **state)
{
    (void)state;
    expect_request_error("\x04", 1, SOCKS5_ERR_VERSION, SOCKS5_REP_FAILURE);
    expect_request_error("\x04\x01\x00\x01\x7f\x00\x00\x01\x00\x50", 10, SOCKS5_ERR_VERSION,
                         SOCKS5_REP_FAILURE);
    expect_request_error("\x05\x01\x01", 3, SOCKS5_ERR_BAD, SOCKS5_REP_FAILURE);
    expect_request_error("\x05\x01\x01\x01\x7f\x00\x00\x01\x00\x50", 10, SOCKS5_ERR_BAD,
                         SOCKS5_REP_FAILURE);
    expect_request_error("\x05\x01\x00\x02", 4, SOCKS5_ERR_BAD, SOCKS5_REP_ATYP_UNSUPPORTED);
    expect_request_error("\x05\x01\x00\x05\x7f\x00\x00\x01\x00\x50", 10, SOCKS5_ERR_BAD,
                         SOCKS5_REP_ATYP_UNSUPPORTED);
    expect_request_error("\x05\x01\x00\x00", 4, SOCKS5_ERR_BAD, SOCKS5_REP_ATYP_UNSUPPORTED);
    expect_request_error("\x05\x01\x00\x03\x00", 5, SOCKS5_ERR_BAD, SOCKS5_REP_FAILURE);
    expect_request_error("\x05\x01\x00\x03\x00\x00\x50", 7, SOCKS5_ERR_BAD, SOCKS5_REP_FAILURE);
    /* A NUL is caught as soon as it arrives, before the name is complete,
     * but a byte past n is not looked at. */
    expect_request_error("\x05\x01\x00\x03\x05" "ab\0", 8, SOCKS5_ERR_BAD, SOCKS5_REP_FAILURE);
    expect_request_error("\x05\x01\x00\x03\x05" "ab\0", 7, SOCKS5_NEED_MORE, SOCKS5_REP_OK);
    expect_request_error("\x05\x01\x00\x03\x05" "abcd\0\x00\x50", 12, SOCKS5_ERR_BAD,
                         SOCKS5_REP_FAILURE);
}

static void
reply_null(void **state)
{
    uint8_t out[22];

    (void)state;
    memset(out, 0xee, sizeof(out));
    assert_int_equal(inbound_socks5_write_reply(out, SOCKS5_REP_REFUSED, NULL), 10);
    assert_memory_equal(out, "\x05\x05\x00\x01\x00\x00\x00\x00\x00\x00", 10);
}

static void
reply_ip4(void **state)
{
    struct sockaddr_in sin;
    uint8_t out[22];

    (void)state;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons(1080);
    assert_int_equal(inet_pton(AF_INET, "192.0.2.1", &sin.sin_addr), 1);
    assert_int_equal(inbound_socks5_write_reply(out, SOCKS5_REP_OK, (struct sockaddr *)&sin), 10);
    assert_memory_equal(out, "\x05\x00\x00\x01\xc0\x00\x02\x01\x04\x38", 10);
}

static void
reply_ip6(void **state)
{
    struct sockaddr_in6 sin6;
    uint8_t out[22];

    (void)state;
    memset(&sin6, 0, sizeof(sin6));
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(443);
    assert_int_equal(inet_pton(AF_INET6, "2001:db8::1", &sin6.sin6_addr), 1);
    assert_int_equal(inbound_socks5_write_reply(out, SOCKS5_REP_OK, (struct sockaddr *)&sin6), 22);
    assert_memory_equal(out,
                        "\x05\x00\x00\x04\x20\x01\x0d\xb8\x00\x00\x00\x00"
                        "\x00\x00\x00\x00\x00\x00\x00\x01\x01\xbb",
                        22);
}

static void
reply_other_family(void **state)
{
    struct sockaddr_un sun;
    uint8_t out[22];

    (void)state;
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    assert_int_equal(inbound_socks5_write_reply(out, SOCKS5_REP_FAILURE, (struct sockaddr *)&sun),
                     10);
    assert_memory_equal(out, "\x05\x01\x00\x01\x00\x00\x00\x00\x00\x00", 10);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(greeting_valid),
        cmocka_unit_test(greeting_invalid),
        cmocka_unit_test(userpass_valid),
        cmocka_unit_test(userpass_invalid),
        cmocka_unit_test(request_ip4),
        cmocka_unit_test(request_ip6),
        cmocka_unit_test(request_name),
        cmocka_unit_test(request_cmd_passes_through),
        cmocka_unit_test(request_invalid),
        cmocka_unit_test(reply_null),
        cmocka_unit_test(reply_ip4),
        cmocka_unit_test(reply_ip6),
        cmocka_unit_test(reply_other_family),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
