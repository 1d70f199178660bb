#include <errno.h>
#include <stdlib.h>

#include "io/io.h"
#include "pool/pool_int.h"
#include "tls/tls.h"

/* Idle connections, refills and hand-outs. The pool keeps what the demand
 * of the last minute asks for (demand.c), refilled after each hand-out and
 * once a second; an idle connection's stream is read while it waits, so a
 * server's close, reset or alert shows up as readable and the connection
 * goes. A refill that fails waits (1 s, doubling to 30 s) before the next,
 * so a server that is down is not hammered. */

#define TICK 1.0
#define BACKOFF_MIN 1.0
#define BACKOFF_MAX 30.0

struct pool_req {
    struct pool *p;
    void *h;                  /* the connector's handle (cold) */
    struct io_stream *s;      /* the warm stream, until delivered */
    struct io_soon later;
    pool_conn_cb cb;
    void *arg;
};

static void maintain(struct pool *p);

void
pool_ref(struct pool *p)
{
    p->refs++;
}

void
pool_unref(struct pool *p)
{
    if (--p->refs == 0)
        free(p);
}

void
pool_count_handshake(struct pool *p, struct io_stream *s)
{
    if (!p->tls)
        return;
    if (tls_stream_resumed(s))
        p->st.resumed++;
    else
        p->st.full++;
}

/* ---- idle connections ---------------------------------------------------- */

static void
unlink_conn(struct pool *p, struct pool_conn *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        p->oldest = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    else
        p->newest = c->prev;
    p->nidle--;
}

/* Takes the stream out of the pool's hands: not reading, no callbacks. */
static struct io_stream *
detach(struct pool *p, struct pool_conn *c)
{
    struct io_stream *s = c->s;

    unlink_conn(p, c);
    io_read_stop(s);
    io_set_callbacks(s, NULL, NULL, NULL);
    free(c);
    return s;
}

/* A clean close (close_notify) so the server keeps the session. */
static void
discard(struct pool *p, struct pool_conn *c, int reset)
{
    io_close(detach(p, c), reset);
}

/* 1 if the idle stream is still good: nothing to read, no end, no error.
 * A server sends nothing on a connection that has not been asked
 * anything, so bytes are as bad as an end. */
static int
alive(struct io_stream *s)
{
    uint8_t b[512];
    ssize_t n = io_read(s, b, sizeof(b));

    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

static void
on_idle_event(void *arg)
{
    struct pool_conn *c = arg;
    struct pool *p = c->p;

    if (alive(c->s))
        return;
    p->st.dead++;
    discard(p, c, 0);
    maintain(p);
}

static void
add_idle(struct pool *p, struct io_stream *s)
{
    struct pool_conn *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        io_close(s, 0);
        return;
    }
    *c = (struct pool_conn){.p = p, .s = s, .since = io_mono_now(), .prev = p->newest};
    if (p->newest != NULL)
        p->newest->next = c;
    else
        p->oldest = c;
    p->newest = c;
    p->nidle++;
    io_set_callbacks(s, on_idle_event, on_idle_event, c);
    io_read_start(s);
}

/* ---- refills ------------------------------------------------------------- */

static void
unlink_fill(struct pool *p, struct pool_fill *f)
{
    if (f->prev != NULL)
        f->prev->next = f->next;
    else
        p->fills = f->next;
    if (f->next != NULL)
        f->next->prev = f->prev;
    p->nfills--;
}

static void
on_filled(void *arg, struct io_stream *s, int err, const char *why)
{
    struct pool_fill *f = arg;
    struct pool *p = f->p;

    unlink_fill(p, f);
    free(f);
    if (s == NULL) {
        p->backoff = p->backoff > 0 ? p->backoff * 2 : BACKOFF_MIN;
        if (p->backoff > BACKOFF_MAX)
            p->backoff = BACKOFF_MAX;
        p->retry_at = io_mono_now() + p->backoff;
        return;
    }
    p->backoff = 0;
    p->st.refills++;
    pool_count_handshake(p, s);
    if (p->nidle >= p->o.max_idle) {
        io_close(s, 0);
        return;
    }
    add_idle(p, s);
    maintain(p);
}

static int
start_fill(struct pool *p)
{
    struct pool_fill *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return -1;
    f->p = p;
    f->h = p->c->open(p->ud, on_filled, f);
    if (f->h == NULL) {
        free(f);
        return -1;
    }
    f->next = p->fills;
    if (p->fills != NULL)
        p->fills->prev = f;
    p->fills = f;
    p->nfills++;
    return 0;
}

static void
cancel_fills(struct pool *p)
{
    while (p->fills != NULL) {
        struct pool_fill *f = p->fills;
        unlink_fill(p, f);
        p->c->cancel(f->h);
        free(f);
    }
}

/* Expires, shrinks to the demand, refills to it; keeps the tick running
 * while anything is held or wanted. */
static void
maintain(struct pool *p)
{
    double now = io_mono_now();
    unsigned target = p->dead ? 0 : pool_demand_target(&p->demand, now, p->o.max_idle);

    while (p->oldest != NULL &&
           (now - p->oldest->since >= p->o.idle_timeout || p->nidle > target)) {
        p->st.expired++;
        discard(p, p->oldest, 0);
    }
    while (!p->dead && now >= p->retry_at && p->nidle + p->nfills < target) {
        if (start_fill(p) != 0)
            break;
    }
    if (p->nidle > 0 || p->nfills > 0 || target > 0) {
        if (!ev_is_active(&p->tick))
            ev_timer_again(p->loop, &p->tick);
    } else {
        ev_timer_stop(p->loop, &p->tick);
    }
}

static void
on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    maintain(w->data);
}

/* ---- the pool ------------------------------------------------------------ */

struct pool *
pool_new(struct ev_loop *loop, const struct pool_opts *o, int tls, const struct pool_connector *c,
         void *ud)
{
    struct pool *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    *p = (struct pool){.loop = loop, .refs = 1, .tls = tls, .o = *o, .c = c, .ud = ud};
    if (p->o.max_idle > POOL_MAX_IDLE_LIMIT)
        p->o.max_idle = POOL_MAX_IDLE_LIMIT;
    if (!(p->o.idle_timeout > 0))
        p->o.idle_timeout = POOL_IDLE_TIMEOUT;
    pool_demand_init(&p->demand);
    ev_init(&p->tick, on_tick);
    p->tick.repeat = TICK;
    p->tick.data = p;
    return p;
}

void
pool_rebind(struct pool *p, void *ud)
{
    p->ud = ud;
}

void
pool_drain(struct pool *p)
{
    cancel_fills(p);
    while (p->oldest != NULL)
        discard(p, p->oldest, 0);
    pool_demand_init(&p->demand);
    p->backoff = p->retry_at = 0;
    ev_timer_stop(p->loop, &p->tick);
}

void
pool_free(struct pool *p)
{
    if (p == NULL)
        return;
    pool_drain(p);
    p->dead = 1;
    pool_unref(p);
}

void
pool_stats(const struct pool *p, struct pool_stats *out)
{
    *out = p->st;
    out->idle = p->nidle;
}

/* ---- hand-outs ----------------------------------------------------------- */

static void
req_free(struct pool_req *r)
{
    pool_unref(r->p);
    free(r);
}

static void
on_warm(void *arg)
{
    struct pool_req *r = arg;
    pool_conn_cb cb = r->cb;
    void *cbarg = r->arg;
    struct io_stream *s = r->s;

    req_free(r);
    cb(cbarg, s, 0, NULL);
}

static void
on_cold(void *arg, struct io_stream *s, int err, const char *why)
{
    struct pool_req *r = arg;
    pool_conn_cb cb = r->cb;
    void *cbarg = r->arg;

    r->h = NULL;
    if (s != NULL)
        pool_count_handshake(r->p, s);
    req_free(r);
    cb(cbarg, s, err, why);
}

/* The newest idle connection that is still good (the oldest are the likelier
 * to have met a server's idle timeout), wrapped for its retry. */
static struct io_stream *
take(struct pool *p)
{
    while (p->newest != NULL) {
        struct pool_conn *c = p->newest;
        if (!alive(c->s)) {
            p->st.dead++;
            discard(p, c, 0);
            continue;
        }
        struct io_stream *s = detach(p, c);
        struct io_stream *g = pool_guard_new(p, s);
        if (g == NULL) {
            io_close(s, 0);
            return NULL;
        }
        return g;
    }
    return NULL;
}

struct pool_req *
pool_acquire(struct pool *p, pool_conn_cb cb, void *arg)
{
    struct pool_req *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return NULL;
    *r = (struct pool_req){.p = p, .cb = cb, .arg = arg};
    pool_ref(p);
    if (!p->dead)
        pool_demand_note(&p->demand, io_mono_now());
    r->s = take(p);
    if (r->s != NULL) {
        p->st.warm++;
        io_soon_init(&r->later, on_warm, r);
        io_soon_arm(p->loop, &r->later);
    } else {
        r->h = p->c->open(p->ud, on_cold, r);
        if (r->h == NULL) {
            req_free(r);
            return NULL;
        }
        p->st.cold++;
    }
    maintain(p);
    return r;
}

void
pool_acquire_cancel(struct pool_req *r)
{
    if (r->s != NULL) {
        io_soon_cancel(r->p->loop, &r->later);
        io_close(r->s, 0);
    }
    if (r->h != NULL)
        r->p->c->cancel(r->h);
    req_free(r);
}

const struct log_counter pool_counters[] = {
#define X(field, key) LOG_COUNTER(struct pool_stats, field, key)
    POOL_STATS(X)
#undef X
    LOG_COUNTER_END};
