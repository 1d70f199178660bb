#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dns/server_int.h"

/* The DNS server's own sockets: UDP read and answered in batches
 * (recvmmsg/sendmmsg: one syscall each way per 32 queries), and TCP with
 * 2-byte length framing (RFC 1035 §4.2.2; pipelined queries answered as
 * they complete, RFC 7766). */

#define BATCH 32
#define SLOT 1500          /* an inline UDP answer; larger ones go out alone */
#define TCP_IDLE 10.0
#define TCP_MAX_CONNS 256
#define TCP_MAX_PER_SOURCE 32 /* one address cannot take every slot */
#define TCP_QUEUE_MAX 65536 /* answers queued before the connection stops reading */

struct dns_tcp_conn {
    struct dns_tcp_conn *next;
    struct dns_server *s;
    uint64_t id;
    int fd;
    ev_io rd, wr;
    ev_timer idle;
    double last;                  /* accepted, or last answered a whole query */
    struct sockaddr_storage peer;
    size_t rlen, wlen, woff;
    uint8_t *wbuf;
    size_t wcap;
    uint8_t rbuf[2 + DNS_MSG_MAX];
};

/* Where an inline UDP answer goes while a batch is being answered. */
static struct {
    struct dns_server *s;
    int active;
    unsigned n;
    struct mmsghdr msg[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_in6 to[BATCH];
    uint8_t buf[BATCH][SLOT];
} out;

/* The asker's address rides with the query (it must fit DNS_CTX_MAX). */
struct udp_ctx {
    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } peer;
    socklen_t len;
};
_Static_assert(sizeof(struct udp_ctx) <= DNS_CTX_MAX, "the UDP context must fit DNS_CTX_MAX");

static void
udp_answer(const void *ctx, const uint8_t *msg, size_t len)
{
    const struct udp_ctx *c = ctx;
    struct dns_server *s = out.s;
    if (out.active && out.n < BATCH && len <= SLOT) {
        unsigned i = out.n++;
        memcpy(out.buf[i], msg, len);
        memcpy(&out.to[i], &c->peer, c->len);
        out.iov[i].iov_base = out.buf[i];
        out.iov[i].iov_len = len;
        out.msg[i].msg_hdr = (struct msghdr){.msg_name = &out.to[i], .msg_namelen = c->len,
                                             .msg_iov = &out.iov[i], .msg_iovlen = 1};
        return;
    }
    if (s != NULL && s->udp_fd >= 0)
        sendto(s->udp_fd, msg, len, 0, &c->peer.sa, c->len);
}

static void
on_udp(struct ev_loop *loop, ev_io *w, int revents)
{
    struct dns_server *s = w->data;
    static uint8_t in[BATCH][DNS_UDP_MAX * 8];
    static struct mmsghdr msgs[BATCH];
    static struct iovec iovs[BATCH];
    static struct udp_ctx peers[BATCH];
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < BATCH; i++) {
            iovs[i] = (struct iovec){in[i], sizeof(in[i])};
            msgs[i].msg_hdr = (struct msghdr){.msg_name = &peers[i].peer,
                                              .msg_namelen = sizeof(peers[i].peer),
                                              .msg_iov = &iovs[i], .msg_iovlen = 1};
        }
        int n = recvmmsg(s->udp_fd, msgs, BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0)
            return;
        out.s = s;
        out.active = 1;
        out.n = 0;
        for (int i = 0; i < n; i++) {
            peers[i].len = msgs[i].msg_hdr.msg_namelen;
            /* max 0: the asker's EDNS0 size bounds the answer (server.c). */
            dns_server_query(s, in[i], msgs[i].msg_len, DNS_MSG_MAX, 1, udp_answer, &peers[i],
                             sizeof(peers[i]));
        }
        out.active = 0;
        for (unsigned sent = 0; sent < out.n;) {
            int k = sendmmsg(s->udp_fd, out.msg + sent, out.n - sent, MSG_DONTWAIT);
            if (k < 0 && errno == EAGAIN)
                break; /* a full socket buffer: UDP answers may be lost */
            sent += k > 0 ? (unsigned)k : 1; /* one bad destination: skip it */
        }
        out.n = 0;
        if (n < BATCH)
            return;
    }
}

static struct dns_tcp_conn *
tcp_find(struct dns_server *s, uint64_t id)
{
    for (struct dns_tcp_conn *c = s->tcp_conns; c != NULL; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

static void
tcp_close(struct dns_tcp_conn *c)
{
    struct dns_server *s = c->s;
    for (struct dns_tcp_conn **p = &s->tcp_conns; *p != NULL; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    ev_io_stop(s->loop, &c->rd);
    ev_io_stop(s->loop, &c->wr);
    ev_timer_stop(s->loop, &c->idle);
    close(c->fd);
    free(c->wbuf);
    free(c);
}

static void
tcp_flush(struct dns_tcp_conn *c)
{
    while (c->woff < c->wlen) {
        ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            ev_io_start(c->s->loop, &c->wr);
            return;
        }
        if (n < 0) {
            tcp_close(c);
            return;
        }
        c->woff += (size_t)n;
    }
    c->woff = c->wlen = 0;
    ev_io_stop(c->s->loop, &c->wr);
    ev_io_start(c->s->loop, &c->rd);
}

static void
tcp_answer(const void *ctx, const uint8_t *msg, size_t len)
{
    const struct {
        struct dns_server *s;
        uint64_t id;
    } *k = ctx;
    struct dns_tcp_conn *c = tcp_find(k->s, k->id);
    if (c == NULL)
        return; /* the client left before the upstream answered */
    if (c->wlen + 2 + len > c->wcap) {
        size_t cap = c->wlen + 2 + len + 4096;
        uint8_t *p = realloc(c->wbuf, cap);
        if (p == NULL)
            return;
        c->wbuf = p;
        c->wcap = cap;
    }
    c->wbuf[c->wlen] = (uint8_t)(len >> 8);
    c->wbuf[c->wlen + 1] = (uint8_t)len;
    memcpy(c->wbuf + c->wlen + 2, msg, len);
    c->wlen += 2 + len;
    if (c->wlen - c->woff > TCP_QUEUE_MAX)
        ev_io_stop(c->s->loop, &c->rd); /* a client that asks but never reads */
    tcp_flush(c);
}

static void
on_tcp_read(struct ev_loop *loop, ev_io *w, int revents)
{
    struct dns_tcp_conn *c = w->data;
    struct dns_server *s = c->s;
    ssize_t n = recv(c->fd, c->rbuf + c->rlen, sizeof(c->rbuf) - c->rlen, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        tcp_close(c);
        return;
    }
    if (n < 0)
        return;
    c->rlen += (size_t)n;
    uint64_t id = c->id;
    size_t off = 0;
    while (c->rlen - off >= 2) {
        size_t len = (size_t)c->rbuf[off] << 8 | c->rbuf[off + 1];
        if (c->rlen - off - 2 < len)
            break;
        struct {
            struct dns_server *s;
            uint64_t id;
        } k = {s, id};
        dns_server_query(s, c->rbuf + off + 2, len, DNS_MSG_MAX, 0, tcp_answer, &k, sizeof(k));
        if ((c = tcp_find(s, id)) == NULL)
            return; /* closed while answering */
        off += 2 + len;
        /* Only whole queries keep a connection: one that trickles a byte
         * at a time (or sends a huge length prefix and then nothing) ends
         * TCP_IDLE after its last complete query. */
        c->last = ev_now(loop);
        ev_timer_again(loop, &c->idle);
    }
    memmove(c->rbuf, c->rbuf + off, c->rlen - off);
    c->rlen -= off;
}

static void
on_tcp_write(struct ev_loop *loop, ev_io *w, int revents)
{
    tcp_flush(w->data);
}

static void
on_tcp_idle(struct ev_loop *loop, ev_timer *w, int revents)
{
    tcp_close(w->data);
}

static int
same_source(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
    return 0;
}

/* The connection that answered a whole query longest ago (of |src| if
 * given); the list is never empty when called. */
static struct dns_tcp_conn *
idlest(struct dns_server *s, const struct sockaddr_storage *src)
{
    struct dns_tcp_conn *best = NULL;
    for (struct dns_tcp_conn *c = s->tcp_conns; c != NULL; c = c->next)
        if ((src == NULL || same_source(&c->peer, src)) && (best == NULL || c->last <= best->last))
            best = c;
    return best != NULL ? best : s->tcp_conns;
}

static void
on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    static uint64_t next_id;
    struct dns_server *s = w->data;
    for (;;) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof(peer);
        int fd = accept4(s->tcp_fd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* Out of descriptors: free the idlest connection's, or the
             * listener stays readable and this loop spins. */
            if ((errno == EMFILE || errno == ENFILE) && s->tcp_conns != NULL)
                tcp_close(idlest(s, NULL));
            return;
        }
        /* Full: the idlest connection (of this source, when it holds its
         * share) makes room, so trickling clients cannot lock others out. */
        size_t live = 0, mine = 0;
        for (struct dns_tcp_conn *c = s->tcp_conns; c != NULL; c = c->next) {
            live++;
            mine += same_source(&c->peer, &peer);
        }
        if (mine >= TCP_MAX_PER_SOURCE)
            tcp_close(idlest(s, &peer));
        else if (live >= TCP_MAX_CONNS)
            tcp_close(idlest(s, NULL));
        struct dns_tcp_conn *c = calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            continue;
        }
        c->s = s;
        c->fd = fd;
        c->peer = peer;
        c->last = ev_now(loop);
        c->id = ++next_id;
        ev_io_init(&c->rd, on_tcp_read, fd, EV_READ);
        ev_io_init(&c->wr, on_tcp_write, fd, EV_WRITE);
        ev_init(&c->idle, on_tcp_idle);
        c->idle.repeat = TCP_IDLE;
        c->rd.data = c->wr.data = c->idle.data = c;
        ev_io_start(loop, &c->rd);
        ev_timer_again(loop, &c->idle);
        c->next = s->tcp_conns;
        s->tcp_conns = c;
    }
}

static int
open_socket(int type, const struct sockaddr_storage *a, char *err, size_t errlen)
{
    socklen_t len = a->ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                            : sizeof(struct sockaddr_in6);
    int fd = socket(a->ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, (const struct sockaddr *)a, len) != 0 ||
        (type == SOCK_STREAM && listen(fd, 128) != 0)) {
        char host[64] = "?";
        int e = errno;
        if (a->ss_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr, host, sizeof(host));
        else
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)a)->sin6_addr, host, sizeof(host));
        snprintf(err, errlen, "dns.listen %s port %u (%s): %s", host,
                 ntohs(((const struct sockaddr_in *)a)->sin_port),
                 type == SOCK_STREAM ? "tcp" : "udp", strerror(e));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (type == SOCK_DGRAM) {
        int size = 4 << 20; /* bursts of queries must not overflow the queue */
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
    }
    return fd;
}

int
dns_server_listen(struct dns_server *s, const struct sockaddr_storage *addr, char *err,
                  size_t errlen)
{
    struct sockaddr_storage tcp;
    if (addr != NULL) {
        s->udp_fd = open_socket(SOCK_DGRAM, addr, err, errlen);
        if (s->udp_fd < 0)
            return -1;
        ev_io_init(&s->udp_io, on_udp, s->udp_fd, EV_READ);
        s->udp_io.data = s;
        ev_io_start(s->loop, &s->udp_io);
        tcp = *addr;
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&tcp;
        memset(&tcp, 0, sizeof(tcp));
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    s->tcp_fd = open_socket(SOCK_STREAM, &tcp, err, errlen);
    if (s->tcp_fd < 0)
        return -1;
    socklen_t len = sizeof(s->tcp_addr);
    getsockname(s->tcp_fd, (struct sockaddr *)&s->tcp_addr, &len);
    ev_io_init(&s->tcp_io, on_accept, s->tcp_fd, EV_READ);
    s->tcp_io.data = s;
    ev_io_start(s->loop, &s->tcp_io);
    return 0;
}

void
dns_server_unlisten(struct dns_server *s)
{
    while (s->tcp_conns != NULL)
        tcp_close(s->tcp_conns);
    if (s->udp_fd >= 0) {
        ev_io_stop(s->loop, &s->udp_io);
        close(s->udp_fd);
        s->udp_fd = -1;
    }
    if (s->tcp_fd >= 0) {
        ev_io_stop(s->loop, &s->tcp_io);
        close(s->tcp_fd);
        s->tcp_fd = -1;
    }
    if (out.s == s)
        out.s = NULL;
}

const struct sockaddr_storage *
dns_server_tcp_addr(const struct dns_server *s)
{
    return &s->tcp_addr;
}
