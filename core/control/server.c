#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control/control_int.h"
#include "io/io.h"
#include "log/log.h"

/* The listener, the clients' sockets and the one-second tick. */

#define IDLE_TIMEOUT 120.0 /* seconds a keep-alive client may stay silent */
/* Seconds from accept to the first whole request: the idle clock restarts
 * on every byte, so without this a byte a minute holds a client forever. */
#define CONTROL_HS_DEADLINE 10.0

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

static void
client_free(struct control_client *cl)
{
    struct control *c = cl->c;
    if (cl->fd >= 0) {
        ev_io_stop(c->env.loop, &cl->rw);
        ev_io_stop(c->env.loop, &cl->ww);
        close(cl->fd);
    }
    control_ws_free(cl);
    control_delay_cancel(cl);
    control_dns_cancel(cl);
    control_list_end(cl);
    cl->prev->next = cl->next;
    cl->next->prev = cl->prev;
    c->nclients--;
    free(cl->out);
    free(cl);
}

void
control_client_kill(struct control_client *cl)
{
    if (cl->busy) {
        cl->dead = 1; /* freed by control_client_input on the way out */
        return;
    }
    client_free(cl);
}

void
control_client_park(struct control_client *cl)
{
    cl->dead = 1;
    if (cl->fd >= 0) {
        ev_io_stop(cl->c->env.loop, &cl->rw);
        ev_io_stop(cl->c->env.loop, &cl->ww);
    }
}

void
control_client_flush(struct control_client *cl)
{
    struct control *c = cl->c;
    for (;;) {
        while (cl->out_off < cl->out_len) {
            size_t n = cl->out_len - cl->out_off;
            if (cl->fd < 0) {
                if (cl->fake_cb != NULL)
                    cl->fake_cb(cl->fake_arg, cl->out + cl->out_off, n);
                cl->out_off += n;
                continue;
            }
            ssize_t w = write(cl->fd, cl->out + cl->out_off, n);
            if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
                ev_io_start(c->env.loop, &cl->ww);
                return;
            }
            if (w < 0) {
                control_client_kill(cl);
                return;
            }
            cl->out_off += (size_t)w;
        }
        cl->out_off = cl->out_len = 0;
        if (cl->fd >= 0)
            ev_io_stop(c->env.loop, &cl->ww);
        /* WebSocket messages wslay held back while the queue was full. */
        if (cl->mode == MODE_WS && control_ws_pump(cl) != 0)
            return;
        if (cl->out_len > 0)
            continue;
        if (!cl->listing)
            break;
        /* GET /connections: the next slice of the list, now that the
         * last one is out. */
        control_list_more(cl);
        if (cl->dead)
            return;
        if (!cl->listing && cl->fd >= 0 && cl->mode == MODE_HTTP)
            ev_io_start(c->env.loop, &cl->rw); /* pipelined requests wait in cl->in */
    }
    if (cl->close_after && cl->mode != MODE_WS)
        control_client_kill(cl);
}

static void
on_write(struct ev_loop *loop, ev_io *w, int revents)
{
    struct control_client *cl = CONTAINER(w, struct control_client, ww);
    cl->busy = 1;
    control_client_flush(cl);
    cl->busy = 0;
    if (cl->dead)
        control_client_kill(cl);
    else if (control_client_ready(cl))
        control_client_input(cl); /* pipelined behind a list that just ended */
}

static void
on_read(struct ev_loop *loop, ev_io *w, int revents)
{
    struct control_client *cl = CONTAINER(w, struct control_client, rw);
    if (cl->in_len == sizeof(cl->in) && cl->mode != MODE_HTTP)
        cl->in_len = 0;
    ssize_t n = read(cl->fd, cl->in + cl->in_len, sizeof(cl->in) - cl->in_len);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        control_client_kill(cl);
        return;
    }
    if (n < 0)
        return;
    cl->in_len += (size_t)n;
    cl->last_active = io_mono_now();
    if (control_client_input(cl) != 0)
        return;
    /* While a list is written, or the buffer holds a whole unread
     * pipeline, wait: the flush starts reading again. */
    if (cl->listing || CONTROL_WAITING(cl) || cl->in_len == sizeof(cl->in))
        ev_io_stop(loop, &cl->rw);
}

void
control_client_resume(struct control_client *cl)
{
    if (cl->fd >= 0 && cl->mode == MODE_HTTP)
        ev_io_start(cl->c->env.loop, &cl->rw);
    if (cl->in_len > 0)
        control_client_input(cl); /* requests that came while it waited */
}

static struct control_client *
client_new(struct control *c, int fd)
{
    struct control_client *cl = calloc(1, sizeof(*cl));
    if (cl == NULL)
        return NULL;
    cl->c = c;
    cl->fd = fd;
    cl->last_active = cl->since = io_mono_now();
    cl->next = &c->head;
    cl->prev = c->head.prev;
    cl->prev->next = cl;
    c->head.prev = cl;
    c->nclients++;
    c->st.clients++;
    if (fd >= 0) {
        ev_io_init(&cl->rw, on_read, fd, EV_READ);
        ev_io_init(&cl->ww, on_write, fd, EV_WRITE);
        ev_io_start(c->env.loop, &cl->rw);
    }
    return cl;
}

/* At CONTROL_MAX_CLIENTS: the oldest client that has not sent a whole
 * request yet goes, so a flood of silent connections cannot lock the
 * dashboard out. 0 if there is none (the newcomer is refused). */
static int
unfinished(const struct control_client *cl)
{
    return !cl->answered && !cl->busy && !cl->dead && cl->fd >= 0;
}

static int
drop_oldest_unfinished(struct control *c)
{
    for (struct control_client *cl = c->head.next; cl != &c->head; cl = cl->next)
        if (unfinished(cl)) {
            c->st.dropped++;
            control_client_kill(cl);
            return 1;
        }
    return 0;
}

/* A newcomer from |src| with CONTROL_HS_PER_SOURCE of its address's
 * clients unfinished: the oldest of them goes (the list is oldest first),
 * as the SOCKS5/HTTP listeners do (inbound/listener.c hs_make_room). */
static void
source_make_room(struct control *c, const uint8_t src[16])
{
    struct control_client *oldest = NULL;
    size_t same = 0;
    for (struct control_client *cl = c->head.next; cl != &c->head; cl = cl->next)
        if (unfinished(cl) && memcmp(cl->src, src, 16) == 0 && same++ == 0)
            oldest = cl;
    if (same < CONTROL_HS_PER_SOURCE)
        return;
    c->st.source_drops++;
    double now = io_mono_now();
    if (c->hs_logged == 0 || now - c->hs_logged >= 10) {
        c->hs_logged = now;
        LOG_WARN("control: too many unfinished clients from one source (cap %d per source, %d in "
                 "all): closing its oldest (counted in control.source_drops)",
                 CONTROL_HS_PER_SOURCE, CONTROL_MAX_CLIENTS);
    }
    control_client_kill(oldest);
}

static void
on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    struct control *c = CONTAINER(w, struct control, w);
    for (int i = 0; i < 32; i++) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof(peer);
        int fd = accept4(c->fd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* One line per episode, one per 10 s when they follow
                 * each other (clients come and go at the edge). */
                if (c->paused++ == 0 && io_mono_now() - c->emfile_logged >= 10) {
                    c->emfile_logged = io_mono_now();
                    c->emfile_told = 1;
                    LOG_WARN("control: accept: %s; pausing accepts 100 ms at a time until "
                             "descriptors free up", strerror(errno));
                }
                ev_io_stop(loop, &c->w);
                /* A one-shot timer keeps its spent time: set it again, or
                 * every pause after the first would end at once. */
                ev_timer_set(&c->retry, 0.1, 0);
                ev_timer_start(loop, &c->retry);
            }
            return;
        }
        if (c->paused > 0) {
            if (c->emfile_told)
                LOG_INFO("control: accept resumed after %d pauses", c->paused);
            c->paused = c->emfile_told = 0;
        }
        uint8_t src[16];
        flow_sockaddr_key(src, &peer);
        source_make_room(c, src);
        if (c->nclients >= CONTROL_MAX_CLIENTS && !drop_oldest_unfinished(c)) {
            c->st.dropped++;
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct control_client *cl = client_new(c, fd);
        if (cl == NULL)
            close(fd);
        else
            memcpy(cl->src, src, 16);
    }
}

static void
on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
    ev_io_start(loop, &CONTAINER(w, struct control, retry)->w);
}

static void
on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct control *c = CONTAINER(w, struct control, tick);
    double now = io_mono_now();
    for (struct control_client *cl = c->head.next, *next; cl != &c->head; cl = next) {
        next = cl->next;
        if (cl->dead && !cl->busy) {
            client_free(cl); /* parked by the log tap */
            continue;
        }
        if (cl->fd >= 0 && cl->mode == MODE_HTTP && !cl->answered && !cl->busy &&
            now - cl->since > CONTROL_HS_DEADLINE) {
            c->st.hs_timeouts++;
            control_client_kill(cl);
            continue;
        }
        if (cl->fd >= 0 && cl->mode == MODE_HTTP && !cl->listing && !CONTROL_WAITING(cl) &&
            now - cl->last_active > IDLE_TIMEOUT)
            control_client_kill(cl);
    }
    control_streams_tick(c);
}

static int
open_listener(const struct control_opts *o, char *err, size_t errlen)
{
    int fd = socket(o->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (const struct sockaddr *)&o->addr, o->addrlen) != 0 || listen(fd, 128) != 0) {
        snprintf(err, errlen, "control: listen on %s: %s", o->text, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static void
close_listener(struct control *c)
{
    if (c->fd < 0)
        return;
    ev_io_stop(c->env.loop, &c->w);
    ev_timer_stop(c->env.loop, &c->retry);
    close(c->fd);
    c->fd = -1;
}

/* Every client but the one whose request is being answered (busy) goes;
 * that one is closed after its answer when |all|. */
static void
drop_clients(struct control *c, int all)
{
    for (struct control_client *cl = c->head.next; cl != &c->head; cl = cl->next) {
        if (cl->busy)
            cl->close_after |= all;
        else if (!cl->dead)
            control_client_park(cl); /* the tick frees it: a caller may hold it */
    }
}

int
control_configure(struct control *c, const struct control_opts *o, char *err, size_t errlen)
{
    if (o == NULL) {
        if (c->fd >= 0)
            LOG_INFO("control: the bundle has no control = {...} now: %s closed", c->o.text);
        close_listener(c);
        drop_clients(c, 1);
        c->o.text[0] = '\0';
        return 0;
    }
    int moved = c->fd < 0 || strcmp(o->text, c->o.text) != 0 || o->addrlen != c->o.addrlen ||
                memcmp(&o->addr, &c->o.addr, o->addrlen) != 0;
    if (moved) {
        /* The new one first: if it cannot listen, the old one stays. */
        int fd = open_listener(o, err, errlen);
        if (fd < 0)
            return -1;
        close_listener(c);
        c->fd = fd;
        ev_io_set(&c->w, fd, EV_READ);
        ev_io_start(c->env.loop, &c->w);
        snprintf(c->origin, sizeof(c->origin), "http://%s", o->text);
        LOG_INFO("control: listening on http://%s now", o->text);
    }
    if (strcmp(o->secret, c->o.secret) != 0) {
        /* Clients let in with the old secret (streams too) must ask again. */
        drop_clients(c, 0);
        LOG_INFO("control: a new secret; %s", "the clients connected before were closed");
    }
    c->o = *o;
    return 0;
}

struct control *
control_new(const struct control_env *env, const struct control_opts *o, char *err, size_t errlen)
{
    struct control *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(err, errlen, "control: out of memory");
        return NULL;
    }
    c->env = *env;
    c->fd = -1;
    c->dns_timeout = 5.0;
    c->head.prev = c->head.next = &c->head;
    ev_init(&c->w, on_accept);
    ev_timer_init(&c->retry, on_retry, 0.1, 0);
    if (o != NULL) {
        c->o = *o;
        snprintf(c->origin, sizeof(c->origin), "http://%s", o->text);
        if ((c->fd = open_listener(o, err, errlen)) < 0) {
            free(c);
            return NULL;
        }
        ev_io_set(&c->w, c->fd, EV_READ);
        ev_io_start(env->loop, &c->w);
    }
    ev_timer_init(&c->tick, on_tick, 1.0, 1.0);
    ev_timer_start(env->loop, &c->tick);
    log_set_tap(control_logs_tap, c);
    if (o != NULL)
        LOG_INFO("control: listening on http://%s%s (dashboard: /ui/)", o->text,
                 o->secret[0] ? " (secret)" : "");
    return c;
}

void
control_free(struct control *c)
{
    if (c == NULL)
        return;
    log_set_tap(NULL, NULL);
    while (c->head.next != &c->head)
        client_free(c->head.next);
    close_listener(c);
    ev_timer_stop(c->env.loop, &c->tick);
    free(c);
}

struct control_client *
control_client_fake(struct control *c, void (*cb)(void *arg, const char *p, size_t n), void *arg)
{
    struct control_client *cl = client_new(c, -1);
    if (cl != NULL) {
        cl->fake_cb = cb;
        cl->fake_arg = arg;
    }
    return cl;
}

int
control_client_feed(struct control_client *cl, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        size_t room = sizeof(cl->in) - cl->in_len;
        if (room == 0 && cl->mode != MODE_HTTP)
            cl->in_len = 0, room = sizeof(cl->in);
        if (room == 0)
            return 0; /* a full pipeline: the rest waits, as the socket's would */
        size_t n = len < room ? len : room;
        memcpy(cl->in + cl->in_len, p, n);
        cl->in_len += n;
        p += n;
        len -= n;
        if (control_client_input(cl) != 0)
            return -1;
    }
    return 0;
}

void
control_test_secret(struct control *c, const char *secret)
{
    snprintf(c->o.secret, sizeof(c->o.secret), "%s", secret);
}

void
control_client_close(struct control_client *cl)
{
    control_client_kill(cl);
}
