/* core/pool: the size from the demand of the last minute (demand.c); warm
 * hand-outs and refills; a dead idle connection discarded, never handed
 * out; a warm hand-out that fails before its first answer retried once on
 * a fresh connection with the bytes written again (guard.c). The
 * "server" is the far end of a socketpair per connection, made by a fake
 * connector that answers from the loop, as the real one does. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../loop.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pool/pool.h"

static struct ev_loop *loop;

#define MAX_CONNS 32

/* The fake connector: each open makes a socketpair; the pool gets one end
 * (from the loop's next iteration), the test keeps the other. */
struct fake {
    int opens, cancels, fail;
    int peer[MAX_CONNS];     /* the server ends, by open order */
};
static struct fake fk;

struct fake_open {
    ev_timer t;
    pool_conn_cb cb;
    void *arg;
};

static void
on_fake_open(struct ev_loop *l, ev_timer *w, int revents)
{
    struct fake_open *o = (struct fake_open *)w;
    pool_conn_cb cb = o->cb;
    void *arg = o->arg;
    int sv[2];

    free(o);
    if (fk.fail || fk.opens >= MAX_CONNS || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        cb(arg, NULL, ECONNREFUSED, "refused");
        return;
    }
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    fk.peer[fk.opens++] = sv[1];
    cb(arg, io_fd_new(l, sv[0]), 0, NULL);
}

static void *
fake_open(void *ud, pool_conn_cb cb, void *arg)
{
    struct fake_open *o = calloc(1, sizeof(*o));

    ev_timer_init(&o->t, on_fake_open, 0, 0);
    o->cb = cb;
    o->arg = arg;
    ev_timer_start(loop, &o->t);
    return o;
}

static void
fake_cancel(void *h)
{
    struct fake_open *o = h;

    fk.cancels++;
    ev_timer_stop(loop, &o->t);
    free(o);
}

static const struct pool_connector connector = {.open = fake_open, .cancel = fake_cancel};

static int
setup(void **state)
{
    memset(&fk, 0, sizeof(fk));
    for (int i = 0; i < MAX_CONNS; i++)
        fk.peer[i] = -1;
    return 0;
}

static int
teardown(void **state)
{
    for (int i = 0; i < MAX_CONNS; i++)
        if (fk.peer[i] >= 0)
            close(fk.peer[i]);
    return 0;
}

static struct pool *
new_pool(unsigned max_idle)
{
    struct pool_opts o = {.enabled = 1, .max_idle = max_idle, .idle_timeout = 30};
    struct pool *p = pool_new(loop, &o, 0, &connector, NULL);
    assert_non_null(p);
    return p;
}

/* An acquire, run to its callback. */
struct got {
    int done;
    struct io_stream *s;
    int err;
};

static void
on_got(void *arg, struct io_stream *s, int err, const char *why)
{
    struct got *g = arg;
    g->done = 1;
    g->s = s;
    g->err = err;
}

static struct io_stream *
acquire(struct pool *p)
{
    struct got g = {0};
    assert_non_null(pool_acquire(p, on_got, &g));
    assert_false(g.done); /* never from inside the call */
    assert_true(loop_run_until(loop, &g.done, 2));
    assert_non_null(g.s);
    return g.s;
}

static struct pool_stats
stats(struct pool *p)
{
    struct pool_stats st;
    pool_stats(p, &st);
    return st;
}

/* Runs the loop until the pool holds |n| idle connections (or 2 s). */
static void
wait_idle(struct pool *p, uint64_t n)
{
    for (int i = 0; i < 200 && stats(p).idle != n; i++)
        loop_run_until(loop, NULL, 0.01);
    assert_int_equal(stats(p).idle, n);
}

/* ---- sizing --------------------------------------------------------------- */

static void
test_demand_follows_busiest_second(void **state)
{
    struct pool_demand d;
    pool_demand_init(&d);
    assert_int_equal(pool_demand_target(&d, 1000.0, 8), 0); /* no demand: nothing warm */
    pool_demand_note(&d, 1000.1);
    assert_int_equal(pool_demand_target(&d, 1000.5, 8), 1);
    for (int i = 0; i < 5; i++)
        pool_demand_note(&d, 1010.2 + i * 0.1); /* a burst of 5 in one second */
    pool_demand_note(&d, 1020.0);
    assert_int_equal(pool_demand_target(&d, 1020.5, 8), 5);
    assert_int_equal(pool_demand_target(&d, 1020.5, 3), 3);  /* max_idle bounds it */
    assert_int_equal(pool_demand_target(&d, 1069.0, 8), 5);  /* the burst is 59 s old */
    assert_int_equal(pool_demand_target(&d, 1075.0, 8), 1);  /* the burst left the minute */
    assert_int_equal(pool_demand_target(&d, 1081.0, 8), 0);  /* a minute without a flow */
    for (int i = 0; i < 20; i++)
        pool_demand_note(&d, 2000.5);
    assert_int_equal(pool_demand_target(&d, 2000.9, 8), 8);
}

/* The first flow waits for its own connection; the pool fills behind it to
 * what the demand asks and the next flows are handed idle ones at once. */
static void
test_cold_then_warm_then_refilled(void **state)
{
    struct pool *p = new_pool(8);
    struct io_stream *a = acquire(p);
    assert_int_equal(stats(p).cold, 1);
    assert_int_equal(stats(p).warm, 0);
    wait_idle(p, 1); /* one flow in this second: one warm connection */
    assert_int_equal(stats(p).refills, 1);
    struct io_stream *b = acquire(p);
    assert_int_equal(stats(p).warm, 1);
    assert_int_equal(stats(p).cold, 1);
    /* Two flows this second now: two kept, refilled in the background. */
    wait_idle(p, 2);
    assert_int_equal(fk.opens, 4);
    io_close(a, 0);
    io_close(b, 0);
    pool_free(p);
}

/* Never more idle connections than max_idle, whatever the burst; a burst
 * that finds the pool empty opens the flows' own connections. */
static void
test_max_idle_bounds_the_pool(void **state)
{
    struct pool *p = new_pool(3);
    struct got g[10] = {{0}};
    for (int i = 0; i < 10; i++)
        assert_non_null(pool_acquire(p, on_got, &g[i]));
    for (int i = 0; i < 10; i++) {
        assert_true(loop_run_until(loop, &g[i].done, 2));
        assert_non_null(g[i].s);
    }
    wait_idle(p, 3);
    loop_run_until(loop, NULL, 0.1);
    assert_int_equal(stats(p).idle, 3);
    assert_int_equal(stats(p).cold, 10);
    assert_int_equal(fk.opens, 13); /* the flows' own 10 plus max_idle */
    for (int i = 0; i < 10; i++)
        io_close(g[i].s, 0);
    pool_free(p);
}

/* ---- dead idle connections ----------------------------------------------- */

/* The server closes an idle connection: the pool notices (readable, end of
 * data) and discards it, then refills. */
static void
test_dead_idle_discarded(void **state)
{
    struct pool *p = new_pool(8);
    io_close(acquire(p), 0);
    wait_idle(p, 1);
    close(fk.peer[1]); /* the idle one's server end */
    fk.peer[1] = -1;
    for (int i = 0; i < 200 && stats(p).dead == 0; i++)
        loop_run_until(loop, NULL, 0.01);
    assert_int_equal(stats(p).dead, 1);
    wait_idle(p, 1); /* refilled: the demand is still there */
    assert_int_equal(fk.opens, 3);
    pool_free(p);
}

/* A connection that died since the loop last looked is not handed out:
 * the hand-out checks it first and takes the next one, or opens fresh. */
static void
test_dead_never_handed_out(void **state)
{
    struct pool *p = new_pool(8);
    io_close(acquire(p), 0);
    wait_idle(p, 1);
    close(fk.peer[1]);
    fk.peer[1] = -1;
    struct got g = {0};
    assert_non_null(pool_acquire(p, on_got, &g)); /* no loop turn in between */
    assert_int_equal(stats(p).dead, 1);
    assert_int_equal(stats(p).warm, 0);
    assert_int_equal(stats(p).cold, 2);
    assert_true(loop_run_until(loop, &g.done, 2));
    assert_non_null(g.s);
    assert_int_equal(io_write(g.s, "x", 1), 1); /* a live one */
    io_close(g.s, 0);
    pool_free(p);
}

/* ---- the retry of a warm hand-out ----------------------------------------- */

struct reader {
    int readable, drained;
};

static void
on_readable(void *arg)
{
    ((struct reader *)arg)->readable = 1;
}

static void
on_drain(void *arg)
{
    ((struct reader *)arg)->drained = 1;
}

/* Reads what the server end |fd| got within 2 s into |buf|. */
static size_t
peer_read(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    for (int i = 0; i < 200 && got == 0; i++) {
        loop_run_until(loop, NULL, 0.01);
        ssize_t n = recv(fd, buf, cap, MSG_DONTWAIT);
        if (n > 0)
            got = (size_t)n;
    }
    return got;
}

/* The flow's request goes out, the server ends the connection without a
 * byte of answer: the guard opens a fresh one, writes the request again,
 * and the flow reads the answer from there, never seeing the end. */
static void
test_retry_after_end_before_answer(void **state)
{
    struct pool *p = new_pool(8);
    io_close(acquire(p), 0);
    wait_idle(p, 1);
    struct io_stream *s = acquire(p);
    assert_int_equal(stats(p).warm, 1);
    int first = fk.peer[1];
    struct reader r = {0};
    io_set_callbacks(s, on_readable, on_drain, &r);
    io_read_start(s);
    assert_int_equal(io_write(s, "GET / HTTP/1.0\r\n\r\n", 18), 18);
    char buf[64];
    assert_int_equal(peer_read(first, buf, sizeof(buf)), 18);
    close(first);
    fk.peer[1] = -1;
    int opens = fk.opens;
    /* The flow hears readable and reads: a wait, not the end. */
    assert_true(loop_run_until(loop, &r.readable, 2));
    r.readable = 0;
    errno = 0;
    assert_int_equal(io_read(s, buf, sizeof(buf)), -1);
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(stats(p).retried, 1);
    for (int i = 0; i < 200 && fk.opens == opens; i++)
        loop_run_until(loop, NULL, 0.01);
    int fresh = fk.peer[fk.opens - 1];
    size_t n = peer_read(fresh, buf, sizeof(buf));
    assert_int_equal(n, 18);
    assert_memory_equal(buf, "GET / HTTP/1.0\r\n\r\n", 18);
    assert_int_equal(send(fresh, "HTTP/1.0 200 OK\r\n", 17, 0), 17);
    ssize_t m = -1;
    for (int i = 0; i < 200 && m < 0; i++) {
        loop_run_until(loop, &r.readable, 0.01);
        r.readable = 0;
        m = io_read(s, buf, sizeof(buf));
    }
    assert_int_equal(m, 17);
    assert_memory_equal(buf, "HTTP/1.0 200 OK\r\n", 17);
    /* Answered: no second retry, a later end is the flow's. */
    close(fresh);
    fk.peer[fk.opens - 1] = -1;
    m = -1;
    for (int i = 0; i < 200 && m < 0; i++) {
        loop_run_until(loop, &r.readable, 0.01);
        m = io_read(s, buf, sizeof(buf));
    }
    assert_int_equal(m, 0);
    assert_int_equal(stats(p).retried, 1);
    io_close(s, 0);
    pool_free(p);
}

/* The first write itself fails (EPIPE: the server is gone): the flow's
 * write waits, and the bytes reach a fresh connection. */
static void
test_retry_after_failed_first_write(void **state)
{
    struct pool *p = new_pool(8);
    io_close(acquire(p), 0);
    wait_idle(p, 1);
    struct io_stream *s = acquire(p);
    struct reader r = {0};
    io_set_callbacks(s, on_readable, on_drain, &r);
    shutdown(fk.peer[1], SHUT_RD); /* writes to it now fail; nothing readable for the check */
    errno = 0;
    ssize_t w = io_write(s, "hello", 5);
    assert_int_equal(w, -1);
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(stats(p).retried, 1);
    assert_true(loop_run_until(loop, &r.drained, 2));
    assert_int_equal(io_write(s, "hello", 5), 5);
    char buf[16];
    assert_int_equal(peer_read(fk.peer[fk.opens - 1], buf, sizeof(buf)), 5);
    assert_memory_equal(buf, "hello", 5);
    io_close(s, 0);
    pool_free(p);
}

/* A retry whose fresh connection fails too: the flow sees the failure
 * (once retried is enough). */
static void
test_retry_fails_visibly(void **state)
{
    struct pool *p = new_pool(8);
    io_close(acquire(p), 0);
    wait_idle(p, 1);
    struct io_stream *s = acquire(p);
    struct reader r = {0};
    io_set_callbacks(s, on_readable, on_drain, &r);
    io_read_start(s);
    fk.fail = 1;
    close(fk.peer[1]);
    fk.peer[1] = -1;
    assert_true(loop_run_until(loop, &r.readable, 2));
    char buf[8];
    ssize_t n = io_read(s, buf, sizeof(buf));
    assert_int_equal(n, -1); /* EAGAIN: the retry runs */
    r.readable = r.drained = 0;
    assert_true(loop_run_until(loop, &r.readable, 2));
    errno = 0;
    assert_int_equal(io_read(s, buf, sizeof(buf)), -1);
    assert_int_equal(errno, ECONNREFUSED);
    assert_int_equal(stats(p).retried, 1);
    io_close(s, 0);
    pool_free(p);
}

/* A drained pool (its member was marked down) holds nothing and cancels
 * its refills; flows asking again refill it. */
static void
test_drain(void **state)
{
    struct pool *p = new_pool(8);
    io_close(acquire(p), 0);
    wait_idle(p, 1);
    struct got g = {0};
    assert_non_null(pool_acquire(p, on_got, &g)); /* warm; a refill starts */
    pool_drain(p);
    assert_int_equal(stats(p).idle, 0);
    assert_true(fk.cancels >= 1); /* the refills the demand asked for */
    assert_true(loop_run_until(loop, &g.done, 2)); /* the hand-out still arrives */
    assert_non_null(g.s);
    io_close(g.s, 0);
    loop_run_until(loop, NULL, 0.1);
    assert_int_equal(stats(p).idle, 0);
    io_close(acquire(p), 0);
    wait_idle(p, 1);
    pool_free(p);
}

int
main(void)
{
    signal(SIGPIPE, SIG_IGN);
    loop = ev_default_loop(0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demand_follows_busiest_second),
        cmocka_unit_test_setup_teardown(test_cold_then_warm_then_refilled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_idle_bounds_the_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_idle_discarded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_never_handed_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_end_before_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_failed_first_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_fails_visibly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
