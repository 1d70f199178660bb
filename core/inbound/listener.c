#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/log.h"
#include "inbound/inbound.h"

struct inbound_listener {
    const struct flow_env *e;
    const struct inbound_users *users;
    enum flow_inbound kind;
    int mixed;               /* FLOW_IN_SOCKS: SOCKS5 and HTTP, by the first byte */
    struct flow_addr target; /* FLOW_IN_REVERSE */
    int fd;
    ev_io w;
    ev_timer retry;          /* accept paused after EMFILE/ENFILE */
    int paused;              /* pauses since the last accept that worked (logged once) */
    struct inbound_conn head; /* sentinel of the connection list */
};

static const char *
kind_name(const struct inbound_listener *l)
{
    if (l->mixed)
        return "mixed";
    return l->kind == FLOW_IN_SOCKS ? "socks" : l->kind == FLOW_IN_REVERSE ? "reverse" : "http";
}

static void
on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    struct inbound_listener *l = w->data;
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage peer;
        socklen_t len = sizeof(peer);
        int fd = accept4(l->fd, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors: stop accepting for a moment rather
                 * than spin on a listener that stays readable. One line
                 * per episode: it may last minutes, 10 pauses a second. */
                if (l->paused++ == 0)
                    LOG_WARN("accept on %s: %s; pausing accepts 100 ms at a time until "
                             "descriptors free up",
                             kind_name(l), strerror(errno));
                ev_io_stop(loop, &l->w);
                /* A one-shot timer keeps its spent time: set it again, or
                 * the second pause would end at once. */
                ev_timer_set(&l->retry, 0.1, 0);
                ev_timer_start(loop, &l->retry);
            }
            return;
        }
        if (l->paused > 0) {
            LOG_INFO("accept on %s: resumed after %d pauses", kind_name(l), l->paused);
            l->paused = 0;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (l->mixed)
            inbound_mixed_accept(l, fd, &peer);
        else if (l->kind == FLOW_IN_SOCKS)
            inbound_socks5_accept(l, fd, &peer);
        else if (l->kind == FLOW_IN_REVERSE)
            inbound_reverse_accept(l, fd, &peer);
        else
            inbound_http_accept(l, fd, &peer);
    }
}

static void
on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct inbound_listener *l = w->data;
    ev_io_start(loop, &l->w);
}

struct inbound_listener *
inbound_listen(const struct flow_env *e, enum flow_inbound kind, const struct inbound_opts *cfg,
               char *err, size_t errlen)
{
    struct inbound_listener *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    l->e = e;
    l->users = cfg->users;
    l->kind = kind;
    l->mixed = kind == FLOW_IN_SOCKS && cfg->mixed;
    if (cfg->target != NULL)
        l->target = *cfg->target;
    l->head._prev = l->head._next = &l->head;
    l->fd = socket(cfg->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (l->fd < 0 || setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(l->fd, (const struct sockaddr *)&cfg->addr, cfg->addrlen) != 0 ||
        listen(l->fd, 4096) != 0) {
        snprintf(err, errlen, "listen on %s (%s): %s", cfg->text, kind_name(l),
                 strerror(errno));
        if (l->fd >= 0)
            close(l->fd);
        free(l);
        return NULL;
    }
    ev_io_init(&l->w, on_accept, l->fd, EV_READ);
    l->w.data = l;
    ev_io_start(e->loop, &l->w);
    ev_timer_init(&l->retry, on_retry, 0.1, 0);
    l->retry.data = l;
    LOG_INFO("listening: %s on %s%s",
             l->mixed ? "mixed (socks5+http)" : kind == FLOW_IN_SOCKS ? "socks5" : kind_name(l),
             cfg->text, cfg->users != NULL && cfg->users->n ? " (auth)" : "");
    return l;
}

void
inbound_close(struct inbound_listener *l)
{
    if (l == NULL)
        return;
    ev_io_stop(l->e->loop, &l->w);
    ev_timer_stop(l->e->loop, &l->retry);
    close(l->fd);
    while (l->head._next != &l->head)
        l->head._next->_close(l->head._next);
    free(l);
}

void
inbound_flow_init(struct flow *f, enum flow_inbound kind, int fd,
                  const struct sockaddr_storage *peer)
{
    f->network = FLOW_TCP;
    f->inbound = kind;
    f->src = *peer;
    socklen_t llen = sizeof(f->local);
    getsockname(fd, (struct sockaddr *)&f->local, &llen);
}

int
inbound_port(const struct inbound_listener *l)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (l == NULL || getsockname(l->fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
}

const struct flow_addr *
inbound_target(const struct inbound_listener *l)
{
    return &l->target;
}

const struct flow_env *
inbound_env(const struct inbound_listener *l)
{
    return l->e;
}

void
inbound_conn_link(struct inbound_listener *l, struct inbound_conn *c)
{
    c->_l = l;
    c->_next = &l->head;
    c->_prev = l->head._prev;
    c->_prev->_next = c;
    l->head._prev = c;
}

void
inbound_conn_unlink(struct inbound_conn *c)
{
    c->_prev->_next = c->_next;
    c->_next->_prev = c->_prev;
    c->_prev = c->_next = NULL;
}

int
inbound_auth_required(const struct inbound_listener *l)
{
    return l->users != NULL && l->users->n > 0;
}

/* 1 if |a| (NUL-terminated) equals |b|..|blen|, in a time that depends on
 * the lengths only, not on where the first difference is. */
static int
same_secret(const char *a, const char *b, size_t blen)
{
    size_t alen = strlen(a);
    unsigned char diff = alen != blen;
    for (size_t i = 0; i < blen; i++)
        diff |= (unsigned char)(i < alen ? a[i] : 0) ^ (unsigned char)b[i];
    return diff == 0;
}

int
inbound_auth_check(const struct inbound_listener *l, const char *user, size_t ulen,
                   const char *pass, size_t plen)
{
    const struct inbound_users *c = l->users;
    if (c->n == 0)
        return 1;
    /* Every pair is compared in full: a guess learns nothing from timing
     * about which name exists or how much of a password was right. */
    int ok = 0;
    for (size_t i = 0; i < c->n; i++)
        ok |= same_secret(c->users[2 * i], user, ulen) &
              same_secret(c->users[2 * i + 1], pass, plen);
    return ok;
}
