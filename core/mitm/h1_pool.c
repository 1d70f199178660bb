#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/io.h"
#include "log/log.h"
#include "mitm/mitm_int.h"

/* Idle HTTP/1 connections to origins, shared by every intercepted flow and
 * keyed as the h2 pool is (host, port, scheme, policy). A client
 * connection holds an origin connection only while one of its requests is
 * in flight; between requests, and between the handshakes and the first
 * request, the connection waits here (HAProxy's http-reuse), so a
 * thousand idle clients cost a thousand client TLS endpoints, not two
 * thousand. The newest is taken first (the warmest); a connection unused
 * for MITM_H1_IDLE_SECS is closed, which is where the memory of idle
 * clients goes back (their next request opens one, its TLS session
 * resumed); past MITM_H1_IDLE_MAX the oldest goes at once. A parked
 * connection is watched: a byte out of turn or its end drops it. */

/* Below the shortest keep-alive timeout origins commonly use (Apache's
 * 5 s), so a pooled connection is rarely closed under a request. */
#define MITM_H1_IDLE_SECS 4.0
#define MITM_H1_IDLE_MAX 512

struct mitm_h1_idle {
    struct mitm_h1_pool *p;
    struct mitm_h1_idle *prev, *next; /* newest first */
    struct io_stream *s;
    char host[FLOW_NAME_MAX + 1];
    uint16_t port;
    int plain;
    int policy;
    const char *policy_name;
    double since;
};

struct mitm_h1_pool {
    struct mitm *m;
    struct mitm_h1_idle *head, *tail;
    size_t n;
    ev_timer purge;
};

static void
unlink_idle(struct mitm_h1_pool *p, struct mitm_h1_idle *e)
{
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        p->head = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    else
        p->tail = e->prev;
    p->n--;
}

static void
drop(struct mitm_h1_pool *p, struct mitm_h1_idle *e, const char *why)
{
    unlink_idle(p, e);
    LOG_DEBUG("mitm: idle connection to %s:%u closed (%s)", e->host, e->port, why);
    io_close(e->s, 0);
    free(e);
}

/* The origin spoke while nothing was asked, or closed. */
static void
on_idle_readable(void *arg)
{
    struct mitm_h1_idle *e = arg;
    char b[256];
    ssize_t n = io_read(e->s, b, sizeof(b));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return; /* a TLS record that was not data */
    e->p->m->st.h1_up_closed++;
    drop(e->p, e, n == 0 ? "the origin closed it" : n > 0 ? "bytes out of turn" : "error");
}

static void
on_purge(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct mitm_h1_pool *p = w->data;
    double now = io_mono_now();
    while (p->tail != NULL && now - p->tail->since >= MITM_H1_IDLE_SECS) {
        p->m->st.h1_up_purged++;
        drop(p, p->tail, "idle");
    }
    if (p->tail != NULL) {
        w->repeat = p->tail->since + MITM_H1_IDLE_SECS - now + 0.05;
        ev_timer_again(loop, w);
    } else {
        ev_timer_stop(loop, w);
    }
}

static struct mitm_h1_pool *
pool_of(struct mitm *m)
{
    if (m->h1pool == NULL && (m->h1pool = calloc(1, sizeof(*m->h1pool))) != NULL) {
        m->h1pool->m = m;
        ev_init(&m->h1pool->purge, on_purge);
        m->h1pool->purge.data = m->h1pool;
    }
    return m->h1pool;
}

void
mitm_h1_park(struct mitm *m, const struct flow *f, const char *host, uint16_t port, int plain,
             struct io_stream *s)
{
    struct mitm_h1_pool *p = pool_of(m);
    struct mitm_h1_idle *e = p != NULL ? calloc(1, sizeof(*e)) : NULL;
    if (e == NULL) {
        io_close(s, 0);
        return;
    }
    e->p = p;
    e->s = s;
    snprintf(e->host, sizeof(e->host), "%s", host);
    e->port = port;
    e->plain = plain;
    e->policy = f->policy;
    e->policy_name = f->policy_name;
    e->since = io_mono_now();
    e->next = p->head;
    if (p->head != NULL)
        p->head->prev = e;
    else
        p->tail = e;
    p->head = e;
    p->n++;
    m->st.h1_up_parked++;
    if (p->n > MITM_H1_IDLE_MAX) {
        m->st.h1_up_purged++;
        drop(p, p->tail, "the idle pool is full");
    }
    io_set_callbacks(s, on_idle_readable, NULL, e);
    io_read_start(s);
    if (!ev_is_active(&p->purge)) {
        p->purge.repeat = MITM_H1_IDLE_SECS + 0.05;
        ev_timer_again(m->env->loop, &p->purge);
    }
}

/* The newest idle connection of the key, or NULL. A walk: at most
 * MITM_H1_IDLE_MAX entries, and the newest match is usually first. */
static struct mitm_h1_idle *
find(const struct mitm_h1_pool *p, const struct flow *f, const char *host, uint16_t port,
     int plain)
{
    for (struct mitm_h1_idle *e = p != NULL ? p->head : NULL; e != NULL; e = e->next)
        if (e->port == port && e->plain == plain && e->policy == f->policy &&
            e->policy_name == f->policy_name && strcasecmp(e->host, host) == 0)
            return e;
    return NULL;
}

int
mitm_h1_has(const struct mitm *m, const struct flow *f, const char *host, uint16_t port,
            int plain)
{
    return find(m->h1pool, f, host, port, plain) != NULL;
}

struct io_stream *
mitm_h1_take(struct mitm *m, const struct flow *f, const char *host, uint16_t port, int plain)
{
    struct mitm_h1_pool *p = m->h1pool;
    struct mitm_h1_idle *e = find(p, f, host, port, plain);
    if (e != NULL) {
        struct io_stream *s = e->s;
        unlink_idle(p, e);
        free(e);
        io_read_stop(s);
        io_set_callbacks(s, NULL, NULL, NULL);
        m->st.h1_up_reused++;
        return s;
    }
    return NULL;
}

size_t
mitm_h1_idle_count(const struct mitm *m)
{
    return m->h1pool != NULL ? m->h1pool->n : 0;
}

void
mitm_h1_pool_free(struct mitm *m)
{
    struct mitm_h1_pool *p = m->h1pool;
    if (p == NULL)
        return;
    ev_timer_stop(m->env->loop, &p->purge);
    while (p->head != NULL) {
        struct mitm_h1_idle *e = p->head;
        unlink_idle(p, e);
        io_close(e->s, 0);
        free(e);
    }
    free(p);
    m->h1pool = NULL;
}
