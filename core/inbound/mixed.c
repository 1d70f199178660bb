#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "inbound/inbound.h"
#include "io/io.h"
#include "log/log.h"

/* The mixed port (listen.mixed, Clash's mixed-port): SOCKS5 and HTTP proxy
 * on one listener, told apart by the client's first byte, which is peeked
 * (MSG_PEEK) so the protocol's own handler reads it again: 0x05 is SOCKS5,
 * a token character (what an HTTP method starts with) is HTTP. SOCKS4
 * (0x04) gets its "rejected" reply and a line saying why; anything else
 * (0x16, a TLS ClientHello: an HTTPS proxy setting) is closed with a line.
 * The wait for the first byte counts in the SOCKS5 handshake's deadline
 * (timeouts.connect, from accept); an HTTP head has its own limits from
 * its first byte, as on the HTTP listener. */

struct conn {
    struct inbound_conn base;
    int fd;
    ev_io io;
    ev_timer timer;
    ev_tstamp accepted;
    struct sockaddr_storage peer;
};

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

/* Stops waiting; the socket stays open unless |close_fd|. */
static void
conn_free(struct conn *c, int close_fd)
{
    const struct flow_env *e = inbound_env(c->base._l);
    ev_io_stop(e->loop, &c->io);
    ev_timer_stop(e->loop, &c->timer);
    if (close_fd)
        close(c->fd);
    inbound_conn_unlink(&c->base);
    free(c);
}

static void
close_conn(struct inbound_conn *base)
{
    conn_free((struct conn *)base, 1);
}

/* RFC 7230 tchar: every method (GET, CONNECT, ...) is made of them. */
static int
http_token(unsigned char b)
{
    return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') ||
           (b > 0x20 && b < 0x7f && strchr("!#$%&'*+-.^_`|~", b) != NULL);
}

static void
refuse(struct conn *c, unsigned char b)
{
    char peer[64];
    flow_sockaddr_format(&c->peer, peer, sizeof(peer));
    /* What the client sent is read first: closing over unread bytes would
     * reset the connection and could lose the reply. */
    char junk[512];
    (void)!recv(c->fd, junk, sizeof(junk), MSG_DONTWAIT);
    if (b == 0x04) {
        /* SOCKS4 reply: version 0, 0x5b "request rejected or failed". */
        static const unsigned char rejected[8] = {0x00, 0x5b};
        (void)!send(c->fd, rejected, sizeof(rejected), MSG_NOSIGNAL);
        LOG_INFO("mixed: %s speaks SOCKS4 (first byte 0x04): refused; this port serves SOCKS5 "
                 "and HTTP: set the client to SOCKS5",
                 peer);
    } else {
        LOG_INFO("mixed: %s sent first byte 0x%02x%s, neither SOCKS5 (0x05) nor an HTTP "
                 "request: closed",
                 peer, b, b == 0x16 ? " (a TLS handshake: an HTTPS proxy setting?)" : "");
    }
    conn_free(c, 1);
}

static void
on_read(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = CONTAINER(w, struct conn, io);
    unsigned char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        conn_free(c, 1); /* gone before saying anything */
        return;
    }
    if (b != 0x05 && !http_token(b)) {
        refuse(c, b);
        return;
    }
    struct inbound_listener *l = c->base._l;
    int fd = c->fd;
    struct sockaddr_storage peer = c->peer;
    double left = inbound_env(l)->opts->connect_timeout - (io_mono_now() - c->accepted);
    conn_free(c, 0);
    if (b == 0x05)
        inbound_socks5_accept_within(l, fd, &peer, left);
    else
        inbound_http_accept(l, fd, &peer);
}

static void
on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    conn_free(CONTAINER(w, struct conn, timer), 1);
}

void
inbound_mixed_accept(struct inbound_listener *l, int fd, const struct sockaddr_storage *peer)
{
    const struct flow_env *e = inbound_env(l);
    struct conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        return;
    }
    c->fd = fd;
    c->peer = *peer;
    c->accepted = io_mono_now();
    c->base._close = close_conn;
    inbound_conn_link(l, &c->base, peer);
    ev_io_init(&c->io, on_read, fd, EV_READ);
    ev_io_start(e->loop, &c->io);
    ev_timer_init(&c->timer, on_timeout, e->opts->connect_timeout, 0);
    ev_timer_start(e->loop, &c->timer);
}
