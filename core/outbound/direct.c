#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dns/dns.h"
#include "io/io.h"
#include "log/log.h"
#include "outbound/outbound.h"

/* RFC 8305 §5: start the next address if the current one has not connected
 * within the "Connection Attempt Delay". */
#define ATTEMPT_DELAY 0.25

struct attempt {
    ev_io w;
    int fd;
};

struct outbound_connect {
    struct ev_loop *loop;
    const struct outbound_env *env;
    outbound_connect_cb cb;
    void *arg;
    struct dns_query *query;
    ev_timer timeout;     /* the whole connect, resolution included */
    ev_timer next_timer;  /* Happy Eyeballs: when to start the next address */
    ev_idle deliver;      /* results found inside the call are delivered later */
    int last_err;
    const char *why;
    size_t naddrs, next, pending;
    double t0;            /* debug level only: when the name went to the resolver */
    char name[FLOW_NAME_MAX + 1];
    /* One slot for an IP, DNS_MAX_ADDRS for a name: a thousand flows
     * connecting at once each hold this (memory_limit counts it). */
    size_t cap;
    struct {
        struct sockaddr_storage addr;
        struct attempt att;
    } s[];
};

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

/* Applies the env's interface and mark to a new upstream socket, or hands
 * it to the host's protect callback. */
static int
prepare_socket(const struct outbound_env *env, int fd)
{
    if (env->protect != NULL) {
        int rc = env->protect(env->protect_arg, fd);
        return rc > 0 ? -rc : rc < 0 ? -EPERM : 0;
    }
    if (env->interface[0] != '\0' &&
        setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, env->interface, strlen(env->interface)) != 0)
        return -errno;
    if (env->fwmark != 0 && setsockopt(fd, SOL_SOCKET, SO_MARK, &env->fwmark, sizeof(env->fwmark)) != 0)
        return -errno;
    return 0;
}

static void
stop_all(struct outbound_connect *c)
{
    ev_timer_stop(c->loop, &c->timeout);
    ev_timer_stop(c->loop, &c->next_timer);
    ev_idle_stop(c->loop, &c->deliver);
    for (size_t i = 0; i < c->next; i++) {
        if (c->s[i].att.fd >= 0) {
            ev_io_stop(c->loop, &c->s[i].att.w);
            close(c->s[i].att.fd);
            c->s[i].att.fd = -1;
        }
    }
    if (c->query != NULL) {
        dns_resolve_cancel(c->query);
        c->query = NULL;
    }
}

static void
finish(struct outbound_connect *c, int fd, int err, const char *why)
{
    outbound_connect_cb cb = c->cb;
    void *arg = c->arg;
    stop_all(c);
    free(c);
    cb(arg, fd, err, why);
}

static void start_next(struct outbound_connect *c);

static void
fail_or_wait(struct outbound_connect *c)
{
    if (c->pending == 0 && c->next < c->naddrs)
        start_next(c);
    if (c->pending == 0 && c->next >= c->naddrs)
        finish(c, -1, c->last_err ? c->last_err : EHOSTUNREACH, c->why ? c->why : "connect failed");
}

static void
on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
    struct attempt *a = CONTAINER(w, struct attempt, w);
    struct outbound_connect *c = w->data;
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    ev_io_stop(loop, w);
    c->pending--;
    if (err == 0) {
        int fd = a->fd;
        a->fd = -1;
        finish(c, fd, 0, NULL);
        return;
    }
    close(a->fd);
    a->fd = -1;
    c->last_err = err;
    c->why = strerror(err);
    fail_or_wait(c);
}

static void
start_next(struct outbound_connect *c)
{
    while (c->next < c->naddrs) {
        size_t i = c->next++;
        struct attempt *a = &c->s[i].att;
        const struct sockaddr_storage *ss = &c->s[i].addr;
        socklen_t len = ss->ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                                 : sizeof(struct sockaddr_in6);
        if (c->env->is_self != NULL && c->env->is_self(c->env->self_arg, ss)) {
            c->last_err = ELOOP;
            c->why = "a loop: that is chute's own listener";
            continue;
        }
        a->fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (a->fd < 0) {
            c->last_err = errno;
            c->why = strerror(errno);
            continue;
        }
        int one = 1, rc;
        setsockopt(a->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if ((rc = prepare_socket(c->env, a->fd)) != 0) {
            c->last_err = -rc;
            c->why = strerror(-rc);
            close(a->fd);
            a->fd = -1;
            continue;
        }
        if (connect(a->fd, (const struct sockaddr *)ss, len) != 0 && errno != EINPROGRESS) {
            c->last_err = errno;
            c->why = strerror(errno);
            close(a->fd);
            a->fd = -1;
            continue;
        }
        ev_io_init(&a->w, on_writable, a->fd, EV_WRITE);
        a->w.data = c;
        ev_io_start(c->loop, &a->w);
        c->pending++;
        if (c->next < c->naddrs) {
            ev_timer_set(&c->next_timer, ATTEMPT_DELAY, 0);
            ev_timer_start(c->loop, &c->next_timer);
        }
        return;
    }
}

static void
on_next_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    start_next(CONTAINER(w, struct outbound_connect, next_timer));
}

static void
on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    finish(CONTAINER(w, struct outbound_connect, timeout), -1, ETIMEDOUT, "connect timeout");
}

static void
on_deliver(struct ev_loop *loop, ev_idle *w, int revents)
{
    struct outbound_connect *c = CONTAINER(w, struct outbound_connect, deliver);
    ev_idle_stop(loop, w);
    fail_or_wait(c);
}

/* At debug level: what the name a DIRECT flow connects to resolved to. */
static void
log_resolved(const struct outbound_connect *c, const char *err,
             const struct sockaddr_storage *addrs, size_t n)
{
    double ms = (io_mono_now() - c->t0) * 1000;
    char first[INET6_ADDRSTRLEN] = "?";
    if (err != NULL || n == 0) {
        LOG_DEBUG("dns: %s: %s after %.0f ms", c->name, err ? err : "no address", ms);
        return;
    }
    const void *a = addrs[0].ss_family == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)&addrs[0])->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)&addrs[0])->sin6_addr;
    inet_ntop(addrs[0].ss_family, a, first, sizeof(first));
    LOG_DEBUG("dns: %s resolved in %.0f ms: %zu address%s, first %s", c->name, ms, n,
              n == 1 ? "" : "es", first);
}

static void
on_resolved(void *arg, const char *err, const struct sockaddr_storage *addrs, size_t n)
{
    struct outbound_connect *c = arg;
    c->query = NULL;
    if (log_threshold >= LOG_LEVEL_DEBUG)
        log_resolved(c, err, addrs, n);
    if (err != NULL) {
        finish(c, -1, EHOSTUNREACH, err);
        return;
    }
    uint16_t port = ((const struct sockaddr_in *)&c->s[0].addr)->sin_port;
    if (n > c->cap)
        n = c->cap;
    for (size_t i = 0; i < n; i++) {
        c->s[i].addr = addrs[i];
        if (addrs[i].ss_family == AF_INET)
            ((struct sockaddr_in *)&c->s[i].addr)->sin_port = port;
        else
            ((struct sockaddr_in6 *)&c->s[i].addr)->sin6_port = port;
    }
    c->naddrs = n;
    fail_or_wait(c);
}

struct outbound_connect *
outbound_direct_connect(const struct outbound_env *env, const struct flow_addr *dst,
                        double timeout, outbound_connect_cb cb, void *arg)
{
    size_t cap = dst->kind == FLOW_ADDR_NAME ? DNS_MAX_ADDRS : 1;
    struct outbound_connect *c = calloc(1, sizeof(*c) + cap * sizeof(c->s[0]));
    if (c == NULL)
        return NULL;
    c->cap = cap;
    c->loop = env->loop;
    c->env = env;
    c->cb = cb;
    c->arg = arg;
    for (size_t i = 0; i < cap; i++)
        c->s[i].att.fd = -1;
    ev_timer_init(&c->timeout, on_timeout, timeout, 0);
    ev_timer_start(c->loop, &c->timeout);
    ev_timer_init(&c->next_timer, on_next_timer, ATTEMPT_DELAY, 0);
    ev_idle_init(&c->deliver, on_deliver);

    if (dst->kind == FLOW_ADDR_NAME) {
        /* The port rides in addrs[0] until the addresses arrive. */
        ((struct sockaddr_in *)&c->s[0].addr)->sin_port = htons(dst->port);
        if (log_threshold >= LOG_LEVEL_DEBUG) {
            c->t0 = io_mono_now();
            snprintf(c->name, sizeof(c->name), "%.*s", (int)dst->name_len, dst->name);
        }
        c->query = dns_resolve(env->dns, dst->name, on_resolved, c);
        if (c->query == NULL) {
            stop_all(c);
            free(c);
            return NULL;
        }
        return c;
    }
    if (dst->kind == FLOW_ADDR_IP4) {
        struct sockaddr_in *s = (struct sockaddr_in *)&c->s[0].addr;
        s->sin_family = AF_INET;
        s->sin_port = htons(dst->port);
        memcpy(&s->sin_addr, dst->ip, 4);
    } else {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&c->s[0].addr;
        s->sin6_family = AF_INET6;
        s->sin6_port = htons(dst->port);
        memcpy(&s->sin6_addr, dst->ip, 16);
    }
    c->naddrs = 1;
    start_next(c);
    /* A synchronous failure is reported from the loop, not from inside. */
    if (c->pending == 0)
        ev_idle_start(c->loop, &c->deliver);
    return c;
}

void
outbound_connect_cancel(struct outbound_connect *c)
{
    stop_all(c);
    free(c);
}

int
outbound_direct_udp(const struct outbound_env *env, const struct flow_addr *dst)
{
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (dst->kind == FLOW_ADDR_IP4) {
        struct sockaddr_in *s = (struct sockaddr_in *)&ss;
        s->sin_family = AF_INET;
        s->sin_port = htons(dst->port);
        memcpy(&s->sin_addr, dst->ip, 4);
        len = sizeof(*s);
    } else if (dst->kind == FLOW_ADDR_IP6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
        s->sin6_family = AF_INET6;
        s->sin6_port = htons(dst->port);
        memcpy(&s->sin6_addr, dst->ip, 16);
        len = sizeof(*s);
    } else {
        return -EINVAL;
    }
    int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc = prepare_socket(env, fd);
    if (rc == 0 && connect(fd, (struct sockaddr *)&ss, len) != 0)
        rc = -errno;
    if (rc != 0) {
        close(fd);
        return rc;
    }
    return fd;
}
