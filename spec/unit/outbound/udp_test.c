#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../heap.h"
#include "../loop.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flow/addr.h"
#include "outbound/outbound.h"

/* DIRECT UDP mappings through outbound_udp_open: each one costs little
 * heap (it held a 66.5 KiB seal buffer of its own, which only proxies use:
 * thousands of TUN UDP flows made a heap of mostly untouched holes that
 * RSS crept into, scripts/soak), and datagrams still go and come back. */

#define MAPPINGS 256
#define PER_MAPPING_MAX 2048 /* bytes of heap one DIRECT mapping may hold */

static struct ev_loop *loop;
static int echo_fd;
static uint16_t echo_port;

static int
setup(void **state)
{
    (void)state;
    loop = ev_loop_new(EVFLAG_AUTO);
    echo_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (loop == NULL || echo_fd < 0 || bind(echo_fd, (struct sockaddr *)&a, len) != 0 ||
        getsockname(echo_fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    echo_port = ntohs(a.sin_port);
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    close(echo_fd);
    ev_loop_destroy(loop);
    return 0;
}

struct opened {
    struct outbound_udp *u;
    const char *why;
    int done;
};

static void
on_open(void *arg, struct outbound_udp *u, const char *why)
{
    struct opened *o = arg;
    o->u = u;
    o->why = why;
    o->done = 1;
}

static void
echo_all(void)
{
    uint8_t buf[2048];
    struct sockaddr_storage from;
    for (;;) {
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(echo_fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
        if (n < 0)
            return;
        assert_int_equal(sendto(echo_fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl), n);
    }
}

static void
test_direct_mappings_are_small_and_echo(void **state)
{
    (void)state;
    static struct opened o[MAPPINGS];
    struct outbound_env env = {.loop = loop};
    struct flow_addr dst;
    assert_int_equal(flow_addr_from_ip(&dst, "127.0.0.1", 9, echo_port), 0);

    size_t before = heap_in_use();
    for (int i = 0; i < MAPPINGS; i++) {
        o[i] = (struct opened){0};
        assert_non_null(outbound_udp_open(&env, FLOW_POLICY_DIRECT, &dst, on_open, &o[i]));
    }
    loop_run_until(loop, &o[MAPPINGS - 1].done, 5);
    for (int i = 0; i < MAPPINGS; i++) {
        assert_true(o[i].done);
        assert_null(o[i].why);
        assert_non_null(o[i].u);
    }
    size_t grown = heap_in_use() - before;
    if (grown > (size_t)MAPPINGS * PER_MAPPING_MAX)
        fail_msg("%d DIRECT UDP mappings hold %zu bytes of heap (%zu each; the bound is %d): "
                 "a per-mapping buffer is back (core/outbound/udp_int.h)",
                 MAPPINGS, grown, grown / MAPPINGS, PER_MAPPING_MAX);

    for (int i = 0; i < MAPPINGS; i++) {
        uint8_t msg[64];
        memset(msg, i & 0xff, sizeof(msg));
        msg[0] = (uint8_t)(i >> 8);
        assert_int_equal(outbound_udp_send(o[i].u, msg, sizeof(msg)), sizeof(msg));
    }
    echo_all();
    for (int i = 0; i < MAPPINGS; i++) {
        uint8_t got[2048];
        size_t off = 0;
        ssize_t n = -1;
        for (int tries = 0; tries < 100 && n < 0; tries++) {
            n = outbound_udp_recv(o[i].u, got, sizeof(got), &off);
            if (n < 0 && errno == EAGAIN) {
                usleep(1000);
                echo_all();
            }
        }
        assert_int_equal(n, 64);
        assert_int_equal(got[off], (uint8_t)(i >> 8));
        assert_int_equal(got[off + 63], (uint8_t)(i & 0xff));
        outbound_udp_close(o[i].u);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct_mappings_are_small_and_echo),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
