/* Request-target splitting: absolute form (forward proxy) and authority
 * form (CONNECT), IPv6 literals, default and out-of-range ports. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "http/http.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int
slice_is(struct mem_slice s, const char *want)
{
    return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

static int
split(const char *target, int authority_form, struct mem_slice *host, uint16_t *port,
      struct mem_slice *path)
{
    return http_target_split(mem_slice(target, strlen(target)), authority_form, host, port,
                             path);
}

static void
test_absolute_form(void **state)
{
    static const struct {
        const char *target, *host, *path;
        uint16_t port;
    } ok[] = {
        {"http://example.com/a/b?c=d", "example.com", "/a/b?c=d", 80},
        {"http://example.com", "example.com", "/", 80},
        {"http://example.com:", "example.com", "/", 80},
        {"HTTP://Example.COM:8080/", "Example.COM", "/", 8080},
        {"http://[2001:db8::1]/x", "2001:db8::1", "/x", 80},
        {"http://[::1]:8080", "::1", "/", 8080},
        {"http://[::ffff:192.0.2.1]:1/", "::ffff:192.0.2.1", "/", 1},
        {"http://192.0.2.1:65535/p", "192.0.2.1", "/p", 65535},
        {"http://a.b-c_d~e:00080/#frag", "a.b-c_d~e", "/#frag", 80},
        {"http://xn--bcher-kva.example/%7e", "xn--bcher-kva.example", "/%7e", 80},
    };
    struct mem_slice host, path;
    uint16_t port;
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(ok); i++) {
        if (split(ok[i].target, 0, &host, &port, &path) != 0)
            fail_msg("%s refused", ok[i].target);
        assert_true(slice_is(host, ok[i].host));
        assert_true(slice_is(path, ok[i].path));
        assert_int_equal(port, ok[i].port);
    }
}

static void
test_authority_form(void **state)
{
    static const char *bare[] = {"example.com", "example.com:", "[::1]"};
    struct mem_slice host, path;
    uint16_t port;
    size_t i;

    (void)state;
    assert_int_equal(split("[::1]:8080", 1, &host, &port, &path), 0);
    assert_true(slice_is(host, "::1"));
    assert_int_equal(port, 8080);
    assert_int_equal(path.len, 0);

    assert_int_equal(split("example.com:443", 1, &host, &port, &path), 0);
    assert_true(slice_is(host, "example.com"));
    assert_int_equal(port, 443);

    /* No port in the authority form: 0, for the caller to refuse. */
    for (i = 0; i < COUNT(bare); i++) {
        port = 1;
        assert_int_equal(split(bare[i], 1, &host, &port, &path), 0);
        assert_int_equal(port, 0);
    }
}

static void
test_bad(void **state)
{
    static const struct {
        const char *target;
        int authority_form;
    } bad[] = {
        {"", 0},
        {"", 1},
        {"/origin/form", 0},
        {"https://example.com/", 0},
        {"ftp://example.com/", 0},
        {"http:/example.com/", 0},
        {"http://user@example.com/", 0},
        {"http://user:pw@example.com/", 0},
        {"user@example.com:443", 1},
        {"http:///x", 0},
        {"http://:80/", 0},
        {":443", 1},
        {"http://example.com:0/", 0},
        {"example.com:0", 1},
        {"http://example.com:65536/", 0},
        {"example.com:65536", 1},
        {"example.com:99999999999999999999999", 1},
        {"example.com:8a", 1},
        {"example.com:-1", 1},
        {"example.com:80:80", 1},
        {"http://example.com?q", 0},
        {"http://example.com#f", 0},
        {"http://exa mple.com/", 0},
        {"http://exa\\mple.com/", 0},
        {"example.com/x:443", 1},
        {"http://[::1/", 0},
        {"http://[]/", 0},
        {"http://[::1]x/", 0},
        {"http://[::1]]/", 0},
        {"http://[example.com]/", 0},
        {"http://[1:2:3:4:5:6:7:8:9]/", 0},
        {"[::1]:0", 1},
        {"[::1]:65536", 1},
        {"[fe80::1%25eth0]:80", 1},
    };
    struct mem_slice host = {NULL, 0}, path = {NULL, 0};
    uint16_t port = 7;
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(bad); i++) {
        if (split(bad[i].target, bad[i].authority_form, &host, &port, &path) != HTTP_ERR_BAD)
            fail_msg("\"%s\" accepted", bad[i].target);
        /* Nothing is stored on error. */
        assert_null(host.ptr);
        assert_null(path.ptr);
        assert_int_equal(port, 7);
    }
    assert_int_equal(http_target_split(mem_slice(NULL, 0), 1, &host, &port, &path),
                     HTTP_ERR_BAD);
}

/* The views point into the target, except the static "/". */
static void
test_views(void **state)
{
    static const char t[] = "http://[2001:db8::1]:81/x?y";
    struct mem_slice host, path;
    uint16_t port;

    (void)state;
    assert_int_equal(split(t, 0, &host, &port, &path), 0);
    assert_ptr_equal(host.ptr, t + 8);
    assert_ptr_equal(path.ptr, t + 23);
    assert_int_equal(path.len, 4);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_absolute_form),
        cmocka_unit_test(test_authority_form),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_views),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
