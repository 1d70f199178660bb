#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "dns/upstream.h"

struct dns_exchange {
    struct dns_upstream *u;
    struct dns_upstream_conf *conf;
    dns_exchange_cb cb;
    void *arg;
    ev_io io;
    ev_timer tm;
    int fd;
    int tcp;                /* retrying a truncated answer over TCP: 1 writing, 2 reading */
    int answered;           /* a server failed us other than by silence */
    const char *dead;       /* set when no attempt could even start */
    unsigned attempt, nattempts;
    char qname[DNS_NAME_MAX + 1];
    uint16_t qdcount, qtype, qclass;
    size_t tcp_off, tcp_need; /* TCP: bytes written or read so far, response length */
    uint8_t *tcp_buf;
    uint8_t tcp_len[2];
    size_t len;
    uint8_t msg[];          /* 2-byte length prefix (for TCP), then the query */
};

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

static socklen_t
addr_len(const struct sockaddr_storage *ss)
{
    return ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

static int
same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
    return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
}

static void
set_port_if_zero(struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET && ((struct sockaddr_in *)ss)->sin_port == 0)
        ((struct sockaddr_in *)ss)->sin_port = htons(53);
    else if (ss->ss_family == AF_INET6 && ((struct sockaddr_in6 *)ss)->sin6_port == 0)
        ((struct sockaddr_in6 *)ss)->sin6_port = htons(53);
}

struct dns_upstream_conf *
dns_upstream_conf_new(const struct dns_resolver_opts *o)
{
    struct dns_upstream_conf *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->refs = 1;
    for (size_t i = 0; i < o->nupstream && i < DNS_MAX_UPSTREAMS; i++) {
        int fam = o->upstream[i].ss_family;
        if (fam == AF_INET || fam == AF_INET6)
            c->server[c->nserver++] = o->upstream[i];
    }
    if (c->nserver == 0)
        c->nserver = dns_resolvconf_read("/etc/resolv.conf", c->server, DNS_MAX_UPSTREAMS);
    if (c->nserver == 0) {
        struct sockaddr_in *s = (struct sockaddr_in *)&c->server[0];
        s->sin_family = AF_INET;
        s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        c->nserver = 1;
    }
    for (size_t i = 0; i < c->nserver; i++)
        set_port_if_zero(&c->server[i]);
    memcpy(c->interface, o->interface, sizeof(c->interface));
    c->interface[sizeof(c->interface) - 1] = '\0';
    c->fwmark = o->fwmark;
    c->protect = o->protect;
    c->protect_arg = o->protect_arg;
    c->timeout = o->timeout > 0 ? o->timeout : 2.0;
    c->attempts = o->attempts > 0 ? o->attempts : 1;
    return c;
}

void
dns_upstream_conf_unref(struct dns_upstream_conf *c)
{
    if (c != NULL && --c->refs == 0)
        free(c);
}

int
dns_upstream_conf_same_servers(const struct dns_upstream_conf *a, const struct dns_upstream_conf *b)
{
    if (a->nserver != b->nserver)
        return 0;
    for (size_t i = 0; i < a->nserver; i++)
        if (!same_addr(&a->server[i], &b->server[i]))
            return 0;
    return 1;
}

/* A non-blocking socket that leaves by |c|'s interface and mark, so
 * queries never loop back into the TUN. -errno on failure. */
static int
make_socket(const struct dns_upstream_conf *c, int family, int type)
{
    int fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (c->protect != NULL) {
        int rc = c->protect(c->protect_arg, fd);
        if (rc != 0) {
            close(fd);
            return rc > 0 ? -rc : -EPERM;
        }
        return fd;
    }
    if ((c->interface[0] != '\0' &&
         setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, c->interface, strlen(c->interface)) != 0) ||
        (c->fwmark != 0 && setsockopt(fd, SOL_SOCKET, SO_MARK, &c->fwmark, sizeof(c->fwmark)) != 0)) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int
dns_upstream_conf_probe(const struct dns_upstream_conf *c)
{
    int fd = make_socket(c, c->server[0].ss_family, SOCK_DGRAM);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

void
dns_upstream_init(struct dns_upstream *u, struct ev_loop *loop, struct dns_upstream_conf *conf)
{
    u->loop = loop;
    u->conf = conf;
    conf->refs++;
    u->nrand = 0;
}

void
dns_upstream_fini(struct dns_upstream *u)
{
    dns_upstream_conf_unref(u->conf);
    u->conf = NULL;
}

void
dns_upstream_set_conf(struct dns_upstream *u, struct dns_upstream_conf *conf)
{
    conf->refs++;
    dns_upstream_conf_unref(u->conf);
    u->conf = conf;
}

uint16_t
dns_upstream_random_id(struct dns_upstream *u)
{
    if (u->nrand < 2) {
        ssize_t n = getrandom(u->rand, sizeof(u->rand), GRND_NONBLOCK);
        if (n < (ssize_t)sizeof(u->rand)) {
            /* No entropy yet (early boot): IDs still vary, if guessably. */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t x = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec;
            for (size_t i = n > 0 ? (size_t)n : 0; i < sizeof(u->rand); i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                u->rand[i] = (uint8_t)x;
            }
        }
        u->nrand = sizeof(u->rand);
    }
    u->nrand -= 2;
    return (uint16_t)(u->rand[u->nrand] << 8 | u->rand[u->nrand + 1]);
}

static void
close_attempt(struct dns_exchange *x)
{
    ev_io_stop(x->u->loop, &x->io);
    ev_timer_stop(x->u->loop, &x->tm);
    if (x->fd >= 0)
        close(x->fd);
    x->fd = -1;
    x->tcp = 0;
    free(x->tcp_buf);
    x->tcp_buf = NULL;
}

static void
exchange_free(struct dns_exchange *x)
{
    close_attempt(x);
    dns_upstream_conf_unref(x->conf);
    free(x);
}

void
dns_exchange_cancel(struct dns_exchange *x)
{
    if (x != NULL)
        exchange_free(x);
}

/* Frees the exchange before calling back, so the callback may start or
 * cancel anything. |resp| is |u->buf|, which outlives the call: the
 * resolver defers its own free past a lookup that is delivering. */
static void
finish(struct dns_exchange *x, const uint8_t *resp, size_t len, const char *err)
{
    dns_exchange_cb cb = x->cb;
    void *arg = x->arg;
    if (err != NULL)
        x->u->failures++;
    exchange_free(x);
    cb(arg, resp, len, err);
}

/* Whether |p| answers this exchange's current attempt: ID and question. */
static int
matches(const struct dns_exchange *x, const uint8_t *p, size_t n)
{
    if (n < DNS_HEADER_LEN || !(p[2] & 0x80))
        return 0;
    if (memcmp(p, x->msg + 2, 2) != 0)
        return 0;
    uint16_t qd = (uint16_t)(p[4] << 8 | p[5]);
    if (qd != x->qdcount)
        return 0;
    if (qd == 0)
        return 1;
    char name[DNS_NAME_MAX + 1];
    size_t off = DNS_HEADER_LEN;
    if (dns_name_read(p, n, &off, name, sizeof(name)) != 0 || off + 4 > n)
        return 0;
    uint16_t type = (uint16_t)(p[off] << 8 | p[off + 1]);
    uint16_t klass = (uint16_t)(p[off + 2] << 8 | p[off + 3]);
    return type == x->qtype && klass == x->qclass && strcmp(name, x->qname) == 0;
}

static void start_attempts(struct dns_exchange *x);

static void
next_attempt(struct dns_exchange *x)
{
    /* The old socket stays bound until the new one has its port, so a
     * retry never reuses the source port an attacker may have seen. */
    int old = x->fd;
    x->fd = -1;
    close_attempt(x);
    x->attempt++;
    start_attempts(x);
    if (old >= 0)
        close(old);
    if (x->dead != NULL)
        finish(x, NULL, 0, x->dead);
}

static const struct sockaddr_storage *
server_of(const struct dns_exchange *x)
{
    return &x->conf->server[x->attempt % x->conf->nserver];
}

static void tcp_start(struct dns_exchange *x);

/* A response that matched: done, or the next server, or TCP. */
static void
accept_response(struct dns_exchange *x, const uint8_t *p, size_t n)
{
    uint16_t flags = (uint16_t)(p[2] << 8 | p[3]);
    if ((flags & DNS_FLAG_TC) && !x->tcp) {
        x->u->truncated_tcp++;
        tcp_start(x);
        return;
    }
    int rcode = DNS_RCODE(flags);
    if (rcode == DNS_RCODE_SERVFAIL || rcode == DNS_RCODE_REFUSED) {
        x->answered = 1;
        next_attempt(x);
        return;
    }
    if (p != x->u->buf)
        memmove(x->u->buf, p, n);
    finish(x, x->u->buf, n, NULL);
}

static void
on_udp(struct ev_loop *loop, ev_io *w, int revents)
{
    struct dns_exchange *x = CONTAINER(w, struct dns_exchange, io);
    struct dns_upstream *u = x->u;
    /* Drain: a forged or stale datagram may sit before the real answer. */
    for (;;) {
        struct sockaddr_storage from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(x->fd, u->buf, sizeof(u->buf), 0, (struct sockaddr *)&from, &fl);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return;
            next_attempt(x); /* ICMP unreachable: no point waiting, nor an answer */
            return;
        }
        if (same_addr(&from, server_of(x)) && matches(x, u->buf, (size_t)n)) {
            accept_response(x, u->buf, (size_t)n);
            return;
        }
    }
}

static void
on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct dns_exchange *x = CONTAINER(w, struct dns_exchange, tm);
    if (x->dead != NULL) {
        finish(x, NULL, 0, x->dead);
        return;
    }
    x->u->timeouts++;
    next_attempt(x);
}

static void
set_id(struct dns_exchange *x)
{
    uint16_t id = dns_upstream_random_id(x->u);
    x->msg[2] = (uint8_t)(id >> 8);
    x->msg[3] = (uint8_t)id;
}

/* Sends attempt |x->attempt| over UDP. 0, or -1 when it could not. */
static int
udp_start(struct dns_exchange *x)
{
    const struct sockaddr_storage *srv = server_of(x);
    int fd = make_socket(x->conf, srv->ss_family, SOCK_DGRAM);
    if (fd < 0)
        return -1;
    x->fd = fd;
    set_id(x);
    /* Connected: the kernel drops datagrams from elsewhere and reports
     * an unreachable port at once. */
    if (connect(fd, (const struct sockaddr *)srv, addr_len(srv)) != 0 ||
        send(fd, x->msg + 2, x->len, 0) != (ssize_t)x->len) {
        close(fd);
        x->fd = -1;
        return -1;
    }
    x->u->sent++;
    ev_io_init(&x->io, on_udp, fd, EV_READ);
    ev_io_start(x->u->loop, &x->io);
    ev_timer_set(&x->tm, x->conf->timeout, 0);
    ev_timer_start(x->u->loop, &x->tm);
    return 0;
}

/* Starts the first attempt from |x->attempt| on that can be sent; sets
 * |x->dead| when none is left. */
static void
start_attempts(struct dns_exchange *x)
{
    for (; x->attempt < x->nattempts; x->attempt++) {
        if (udp_start(x) == 0)
            return;
        x->answered = 1;
    }
    x->dead = x->answered ? dns_err_servfail : dns_err_timeout;
}

static void
on_tcp(struct ev_loop *loop, ev_io *w, int revents)
{
    struct dns_exchange *x = CONTAINER(w, struct dns_exchange, io);
    size_t total = x->len + 2;
    if (x->tcp == 1) {
        ssize_t n = send(x->fd, x->msg + x->tcp_off, total - x->tcp_off, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINPROGRESS || errno == EINTR))
            return;
        if (n <= 0)
            goto fail;
        x->tcp_off += (size_t)n;
        if (x->tcp_off == total) {
            x->tcp = 2;
            x->tcp_off = 0;
            ev_io_stop(loop, &x->io);
            ev_io_set(&x->io, x->fd, EV_READ);
            ev_io_start(loop, &x->io);
        }
        return;
    }
    for (;;) {
        uint8_t *dst = x->tcp_buf != NULL ? x->tcp_buf + x->tcp_off : x->tcp_len + x->tcp_off;
        size_t want = x->tcp_buf != NULL ? x->tcp_need - x->tcp_off : 2 - x->tcp_off;
        ssize_t n = recv(x->fd, dst, want, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0)
            goto fail;
        x->tcp_off += (size_t)n;
        if (x->tcp_buf == NULL && x->tcp_off == 2) {
            x->tcp_need = (size_t)(x->tcp_len[0] << 8 | x->tcp_len[1]);
            if (x->tcp_need < DNS_HEADER_LEN || (x->tcp_buf = malloc(x->tcp_need)) == NULL)
                goto fail;
            x->tcp_off = 0;
        } else if (x->tcp_buf != NULL && x->tcp_off == x->tcp_need) {
            if (!matches(x, x->tcp_buf, x->tcp_need))
                goto fail;
            memcpy(x->u->buf, x->tcp_buf, x->tcp_need);
            accept_response(x, x->u->buf, x->tcp_need);
            return;
        }
    }
fail:
    x->answered = 1;
    next_attempt(x);
}

/* Retries the current attempt's server over TCP (RFC 7766); a failure
 * there moves on to the next UDP attempt. */
static void
tcp_start(struct dns_exchange *x)
{
    const struct sockaddr_storage *srv = server_of(x);
    close_attempt(x);
    int fd = make_socket(x->conf, srv->ss_family, SOCK_STREAM);
    if (fd < 0 || (connect(fd, (const struct sockaddr *)srv, addr_len(srv)) != 0 &&
                   errno != EINPROGRESS)) {
        if (fd >= 0)
            close(fd);
        x->answered = 1;
        next_attempt(x);
        return;
    }
    x->fd = fd;
    x->tcp = 1;
    x->tcp_off = 0;
    set_id(x);
    x->u->sent++;
    ev_io_init(&x->io, on_tcp, fd, EV_WRITE);
    ev_io_start(x->u->loop, &x->io);
    ev_timer_set(&x->tm, x->conf->timeout, 0);
    ev_timer_start(x->u->loop, &x->tm);
}

struct dns_exchange *
dns_exchange_start(struct dns_upstream *u, const uint8_t *query, size_t len, dns_exchange_cb cb,
                   void *arg)
{
    if (len < DNS_HEADER_LEN || len > DNS_MSG_MAX)
        return NULL;
    struct dns_exchange *x = calloc(1, sizeof(*x) + len + 2);
    if (x == NULL)
        return NULL;
    x->qdcount = (uint16_t)(query[4] << 8 | query[5]);
    if (x->qdcount > 0) {
        size_t off = DNS_HEADER_LEN;
        if (dns_name_read(query, len, &off, x->qname, sizeof(x->qname)) != 0 || off + 4 > len) {
            free(x);
            return NULL;
        }
        x->qtype = (uint16_t)(query[off] << 8 | query[off + 1]);
        x->qclass = (uint16_t)(query[off + 2] << 8 | query[off + 3]);
    }
    x->u = u;
    x->conf = u->conf;
    x->conf->refs++;
    x->cb = cb;
    x->arg = arg;
    x->fd = -1;
    x->len = len;
    x->msg[0] = (uint8_t)(len >> 8);
    x->msg[1] = (uint8_t)len;
    memcpy(x->msg + 2, query, len);
    x->nattempts = (unsigned)(x->conf->attempts * (int)x->conf->nserver);
    ev_init(&x->io, on_udp);
    ev_init(&x->tm, on_timer);
    start_attempts(x);
    if (x->dead != NULL) {
        /* Reported from the loop, never from inside this call. */
        ev_timer_set(&x->tm, 0, 0);
        ev_timer_start(u->loop, &x->tm);
    }
    return x;
}
