#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "../loop.h"
#include <ev.h>

#include "dns/dns.h"
#include "dns/msg.h"

/* The DNS server's cap on forwarded queries waiting for a slow upstream
 * (issue 19: "pending queries are bounded and counted"): past it the
 * oldest is answered SERVFAIL at once, its upstream exchange stops (no
 * socket held for nobody), and the rest end SERVFAIL within the resolver's
 * timeout. Before, every query waited, one socket per name. */

#define NAMES 10
#define CAP 4

static struct ev_loop *loop;

struct answers {
    int n, servfail;
    int order[NAMES];
};

static void
on_answer(const void *ctx, const uint8_t *msg, size_t len)
{
    struct answers *a = *(struct answers *const *)ctx;
    assert_true(len >= DNS_HEADER_LEN);
    if ((msg[3] & 0x0f) == DNS_RCODE_SERVFAIL)
        a->servfail++;
    a->order[a->n++] = msg[0] << 8 | msg[1]; /* the query's ID: its index */
}

/* An upstream that takes queries and never answers: a UDP socket nobody
 * reads. */
static int
silent_upstream(struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    memset(addr, 0, sizeof(*addr));
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)addr, sizeof(*addr)), 0);
    socklen_t len = sizeof(*addr);
    getsockname(fd, (struct sockaddr *)addr, &len);
    return fd;
}

/* A resolver whose one upstream never answers (|timeout| per attempt, one
 * attempt) and a real-IP server over it with room for |cap| waiting. */
static struct dns_server *
server_over_silent(int *ufd, struct dns_resolver **r, double timeout, size_t cap)
{
    struct sockaddr_in up;
    *ufd = silent_upstream(&up);
    struct dns_resolver_opts ro;
    dns_resolver_opts_default(&ro);
    memcpy(&ro.upstream[0], &up, sizeof(up));
    ro.nupstream = 1;
    ro.timeout = timeout;
    ro.attempts = 1;
    ro.hosts_file = "";
    char err[256];
    *r = dns_resolver_new(loop, &ro, err, sizeof(err));
    assert_non_null(*r);
    struct dns_server_opts so = {.mode = DNS_MODE_REAL_IP, .max_pending = cap};
    struct dns_server *s = dns_server_new(loop, *r, &so, err, sizeof(err));
    assert_non_null(s);
    return s;
}

static void
test_pending_cap(void **state)
{
    int ufd;
    struct dns_resolver *r;
    struct dns_server *s = server_over_silent(&ufd, &r, 0.2, CAP);

    struct answers a = {0};
    struct answers *ap = &a;
    for (int i = 0; i < NAMES; i++) {
        uint8_t q[128];
        char name[32];
        snprintf(name, sizeof(name), "n%d.slow.test", i);
        int n = dns_build_query(q, sizeof(q), (uint16_t)i, name, DNS_TYPE_A, 0);
        assert_true(n > 0);
        dns_server_query(s, q, (size_t)n, DNS_MSG_MAX, 1, on_answer, &ap, sizeof(ap));
    }
    /* The oldest made room, at once, SERVFAIL, in the order they came. */
    assert_int_equal(a.n, NAMES - CAP);
    assert_int_equal(a.servfail, NAMES - CAP);
    for (int i = 0; i < NAMES - CAP; i++)
        assert_int_equal(a.order[i], i);
    struct dns_server_stats st;
    dns_server_stats(s, &st);
    assert_int_equal(st.pending, CAP);
    assert_int_equal(st.pending_dropped, NAMES - CAP);
    struct dns_resolver_stats rs;
    dns_resolver_stats(r, &rs);
    assert_int_equal(rs.abandoned, NAMES - CAP);

    /* The rest: SERVFAIL within the timeout (0.2 s), none left waiting. */
    int done = 0;
    ev_now_update(loop);
    double t0 = ev_now(loop);
    while (a.n < NAMES && ev_now(loop) - t0 < 2) {
        loop_run_until(loop, &done, 0.05);
        ev_now_update(loop);
    }
    assert_int_equal(a.n, NAMES);
    assert_int_equal(a.servfail, NAMES);
    assert_true(ev_now(loop) - t0 < 1.0);
    dns_server_stats(s, &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.servfail, NAMES);

    dns_server_free(s);
    dns_resolver_free(r);
    close(ufd);
}

/* Queries for one name share one exchange; one of them leaving does not
 * stop it for the others. */
static void
test_shared_lookup_survives_cancel(void **state)
{
    int ufd;
    struct dns_resolver *r;
    struct dns_server *s = server_over_silent(&ufd, &r, 0.1, 2);
    struct answers a = {0};
    struct answers *ap = &a;
    uint8_t q[128];
    for (int i = 0; i < 3; i++) {
        int n = dns_build_query(q, sizeof(q), (uint16_t)i, "same.slow.test", DNS_TYPE_A, 0);
        dns_server_query(s, q, (size_t)n, DNS_MSG_MAX, 1, on_answer, &ap, sizeof(ap));
    }
    assert_int_equal(a.n, 1);
    struct dns_resolver_stats rs;
    dns_resolver_stats(r, &rs);
    assert_int_equal(rs.abandoned, 0);
    int done = 0;
    for (int i = 0; i < 40 && a.n < 3; i++)
        loop_run_until(loop, &done, 0.05);
    assert_int_equal(a.n, 3);
    dns_resolver_stats(r, &rs);
    assert_int_equal(rs.timeouts, 1);
    dns_server_free(s);
    dns_resolver_free(r);
    close(ufd);
}

static int
setup(void **state)
{
    loop = ev_loop_new(EVFLAG_AUTO);
    return loop == NULL;
}

static int
teardown(void **state)
{
    ev_loop_destroy(loop);
    return 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pending_cap),
        cmocka_unit_test(test_shared_lookup_survives_cancel),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
