#include "io/io.h"

/* A zero-delay timer: libev runs due timers every iteration and polls
 * without blocking while one is due, so the call comes next iteration even
 * under load (an idle watcher would wait for a quiet loop). */

static void
on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct io_soon *d = w->data;

    d->_fn(d->_arg);
}

void
io_soon_init(struct io_soon *d, void (*fn)(void *), void *arg)
{
    ev_timer_init(&d->_t, on_timer, 0., 0.);
    d->_t.data = d;
    d->_fn = fn;
    d->_arg = arg;
}

void
io_soon_arm(struct ev_loop *loop, struct io_soon *d)
{
    if (!ev_is_active(&d->_t))
        ev_timer_start(loop, &d->_t);
}

void
io_soon_cancel(struct ev_loop *loop, struct io_soon *d)
{
    ev_timer_stop(loop, &d->_t);
}
