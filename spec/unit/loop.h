#ifndef CHUTE_SPEC_UNIT_LOOP_H
#define CHUTE_SPEC_UNIT_LOOP_H

/* The loop helper the unit tests share: run a libev loop until a flag is
 * set or a deadline passes, never longer. */

#include <ev.h>
#include <stddef.h>

static inline void
loop_on_deadline(struct ev_loop *l, ev_timer *w, int revents)
{
    *(int *)w->data = 1;
}

/* Runs |loop| until |*flag| is set (NULL: for |secs|), or |secs| pass;
 * returns whether |*flag| is set. */
static inline int
loop_run_until(struct ev_loop *loop, const int *flag, double secs)
{
    int expired = 0;
    ev_timer t;

    ev_now_update(loop);
    ev_timer_init(&t, loop_on_deadline, secs, 0);
    t.data = &expired;
    ev_timer_start(loop, &t);
    while ((flag == NULL || !*flag) && !expired)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &t);
    return flag != NULL && *flag;
}

#endif
