/* core/io: the socket stream (fd.c) and the next-iteration call (soon.c).
 * An io_fd stream buffers nothing: writev takes what the kernel takes,
 * on_drain follows a short or refused write, on_readable follows the
 * socket after read_start, and io_fd_release gives the socket back.
 * (These cases replace the tests of the buffering plain stream that
 * io_fd_new took the place of.) */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../loop.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/io.h"

static struct ev_loop *loop;

/* Runs the loop until |*flag| is set, or |secs| pass. */
static void
run_until(int *flag, double secs)
{
    loop_run_until(loop, flag, secs);
}

static void
count(void *arg)
{
    (*(int *)arg)++;
}

static void
pair(int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
}

/* ---- the fd stream ---- */

static void
test_fd_writes_and_drains(void **state)
{
    static uint8_t big[1 << 20], got[1 << 20];
    int sv[2], drained = 0, readable = 0, partial = 0;
    size_t sent = 0, recvd = 0;

    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (uint8_t)(i * 7 + 3);
    pair(sv);
    struct io_stream *s = io_fd_new(loop, sv[0]);
    assert_non_null(s);
    io_set_callbacks(s, count, count, &drained);
    assert_string_equal(s->ops->name, "fd");
    assert_int_equal(io_splice_fd(s), sv[0]);
    assert_int_equal(io_base_fd(s), sv[0]);
    assert_null(s->inner);

    /* Nothing to read yet: EAGAIN passes through. */
    char c;
    errno = 0;
    assert_int_equal(io_read(s, &c, 1), -1);
    assert_int_equal(errno, EAGAIN);

    /* Fill the socket: the stream takes what the kernel takes (a short
     * write), then says EAGAIN. */
    for (;;) {
        size_t want = sizeof(big) - sent;
        ssize_t n = io_write(s, big + sent, want);
        if (n < 0) {
            assert_int_equal(errno, EAGAIN);
            break;
        }
        partial |= (size_t)n < want;
        sent += (size_t)n;
        assert_true(sent < sizeof(big));
    }
    assert_true(partial);
    /* Nothing is buffered in the stream: it is still a bare socket. */
    assert_int_equal(io_splice_fd(s), sv[0]);
    assert_int_equal(drained, 0); /* never from inside the call */

    /* The peer reads; on_drain follows once the kernel takes more. */
    while (drained == 0) {
        ssize_t n = recv(sv[1], got + recvd, sizeof(got) - recvd, 0);
        if (n > 0)
            recvd += (size_t)n;
        ev_run(loop, EVRUN_NOWAIT);
    }
    while (recvd < sent) {
        ssize_t n = recv(sv[1], got + recvd, sizeof(got) - recvd, 0);
        assert_true(n > 0);
        recvd += (size_t)n;
    }
    assert_int_equal(recvd, sent);
    assert_memory_equal(got, big, sent);
    /* Once per short write: the watcher stops after calling. */
    for (int i = 0; i < 5; i++)
        ev_run(loop, EVRUN_NOWAIT);
    assert_int_equal(drained, 1);

    /* Reading: on_readable only after read_start, only while bytes wait,
     * and not after read_stop. */
    io_set_callbacks(s, count, NULL, &readable);
    io_read_start(s);
    for (int i = 0; i < 5; i++)
        ev_run(loop, EVRUN_NOWAIT);
    assert_int_equal(readable, 0);
    assert_int_equal(send(sv[1], "ping", 4, 0), 4);
    io_read_stop(s);
    for (int i = 0; i < 5; i++)
        ev_run(loop, EVRUN_NOWAIT);
    assert_int_equal(readable, 0);
    io_read_start(s);
    run_until(&readable, 1.0);
    assert_int_equal(readable, 1);
    char ping[8];
    assert_int_equal(io_read(s, ping, sizeof(ping)), 4);
    io_read_stop(s);

    /* Shutdown after the bytes: the peer sees them, then EOF. */
    assert_int_equal(io_write(s, "tail", 4), 4);
    assert_int_equal(io_shutdown(s), 0);
    char tail[8];
    assert_int_equal(recv(sv[1], tail, sizeof(tail), 0), 4);
    assert_int_equal(recv(sv[1], tail, sizeof(tail), 0), 0);
    errno = 0;
    assert_int_equal(io_write(s, "x", 1), -1);
    assert_int_equal(errno, EPIPE);

    /* EOF from the peer reads as 0; release gives the socket back. */
    shutdown(sv[1], SHUT_WR);
    assert_int_equal(io_read(s, &c, 1), 0);
    assert_int_equal(io_fd_release(s), sv[0]);
    close(sv[0]);
    close(sv[1]);
}

static void
test_fd_full_socket_and_peer_gone(void **state)
{
    static uint8_t fill[1 << 16];
    int sv[2], drained = 0;
    char c;

    pair(sv);
    while (send(sv[0], fill, sizeof(fill), MSG_NOSIGNAL) > 0)
        ; /* the socket is full before the stream sees it */
    struct io_stream *s = io_fd_new(loop, sv[0]);
    io_set_callbacks(s, NULL, count, &drained);
    struct iovec iov[3] = {{"ab", 2}, {"", 0}, {"cdef", 4}};
    errno = 0;
    assert_int_equal(io_writev(s, iov, 3), -1); /* nothing taken, nothing kept */
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(io_write(s, "gh", 2), -1);
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(io_writev(s, iov, 0), 0);
    assert_int_equal(io_shutdown(s), 0); /* at once: nothing waits inside */

    /* The peer goes away: the owner is told through on_drain, and the
     * failure comes back from the next read and write. */
    close(sv[1]);
    run_until(&drained, 1.0);
    assert_int_equal(drained, 1);
    errno = 0;
    assert_int_equal(io_read(s, &c, 1), -1);
    assert_true(errno == EPIPE || errno == ECONNRESET);
    assert_int_equal(io_write(s, "x", 1), -1);
    assert_int_equal(io_fd_release(s), sv[0]);
    close(sv[0]);
}

/* A loopback listener. */
static int
listener(uint16_t *port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(fd, 16), 0);
    getsockname(fd, (struct sockaddr *)&sin, &len);
    *port = ntohs(sin.sin_port);
    return fd;
}

static int
connect_to(uint16_t port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void
test_fd_close_reset(void **state)
{
    uint16_t port;
    int lfd = listener(&port), fd = connect_to(port), peer = accept(lfd, NULL, NULL);
    char c;

    assert_true(fd >= 0 && peer >= 0);
    struct io_stream *s = io_fd_new(loop, fd);
    io_close(s, 1);
    errno = 0;
    assert_int_equal(recv(peer, &c, 1, 0), -1);
    assert_int_equal(errno, ECONNRESET);
    close(peer);

    fd = connect_to(port);
    peer = accept(lfd, NULL, NULL);
    s = io_fd_new(loop, fd);
    io_close(s, 0);
    assert_int_equal(recv(peer, &c, 1, 0), 0); /* a FIN */
    close(peer);
    close(lfd);
}

/* ---- io_soon ---- */

struct soon_probe {
    struct io_soon d;
    int calls;
    unsigned iter; /* ev_iteration() at the call */
    int rearm;     /* arm again from inside the call, this many times */
};

static void
on_soon(void *arg)
{
    struct soon_probe *p = arg;

    p->calls++;
    p->iter = ev_iteration(loop);
    if (p->rearm > 0) {
        p->rearm--;
        io_soon_arm(loop, &p->d);
    }
}

static void
test_soon_once_next_iteration(void **state)
{
    struct soon_probe p = {0};

    io_soon_init(&p.d, on_soon, &p);
    unsigned before = ev_iteration(loop);
    io_soon_arm(loop, &p.d);
    io_soon_arm(loop, &p.d); /* armed twice: still one call */
    assert_int_equal(p.calls, 0);
    ev_run(loop, EVRUN_NOWAIT);
    assert_int_equal(p.calls, 1);
    assert_int_equal(p.iter, before + 1);
    for (int i = 0; i < 5; i++)
        ev_run(loop, EVRUN_NOWAIT);
    assert_int_equal(p.calls, 1);

    /* Armed from inside its own call: once more, an iteration later. */
    p.rearm = 1;
    io_soon_arm(loop, &p.d);
    ev_run(loop, EVRUN_NOWAIT);
    assert_int_equal(p.calls, 2);
    unsigned at = p.iter;
    ev_run(loop, EVRUN_NOWAIT);
    assert_int_equal(p.calls, 3);
    assert_int_equal(p.iter, at + 1);
    ev_run(loop, EVRUN_NOWAIT);
    assert_int_equal(p.calls, 3);
}

static void
on_never(struct ev_loop *l, ev_timer *w, int revents)
{
    *(int *)w->data = 1;
}

/* It does not wait for a quiet loop: with a busy loop (a 1 s timer, an fd
 * always readable) the call still comes on the next pass. */
static void
test_soon_under_load(void **state)
{
    struct soon_probe p = {0};
    int sv[2], readable = 0, late = 0;
    ev_timer t;

    pair(sv);
    assert_int_equal(send(sv[1], "x", 1, 0), 1);
    struct io_stream *s = io_fd_new(loop, sv[0]);
    io_set_callbacks(s, count, NULL, &readable);
    io_read_start(s);
    ev_timer_init(&t, on_never, 1.0, 0);
    t.data = &late;
    ev_timer_start(loop, &t);
    io_soon_init(&p.d, on_soon, &p);
    io_soon_arm(loop, &p.d);
    ev_run(loop, EVRUN_ONCE);
    assert_int_equal(p.calls, 1);
    assert_int_equal(late, 0);
    ev_timer_stop(loop, &t);
    io_close(s, 0);
    close(sv[1]);
}

static void
test_soon_cancel(void **state)
{
    struct soon_probe p = {0};

    io_soon_init(&p.d, on_soon, &p);
    io_soon_cancel(loop, &p.d); /* never armed: a no-op */
    io_soon_arm(loop, &p.d);
    io_soon_cancel(loop, &p.d);
    for (int i = 0; i < 5; i++)
        ev_run(loop, EVRUN_NOWAIT);
    assert_int_equal(p.calls, 0);
    io_soon_cancel(loop, &p.d); /* twice: a no-op */

    /* Armed again after a cancel: it fires. */
    io_soon_arm(loop, &p.d);
    ev_run(loop, EVRUN_NOWAIT);
    assert_int_equal(p.calls, 1);
}

static int
setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    loop = ev_loop_new(EVFLAG_AUTO);
    return 0;
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
        cmocka_unit_test(test_fd_writes_and_drains),
        cmocka_unit_test(test_fd_full_socket_and_peer_gone),
        cmocka_unit_test(test_fd_close_reset),
        cmocka_unit_test(test_soon_once_next_iteration),
        cmocka_unit_test(test_soon_under_load),
        cmocka_unit_test(test_soon_cancel),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
