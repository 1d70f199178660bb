#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "outbound/proxy.h"
#include "io/io.h"
#include "outbound/udp_int.h"

/* UDP through a SOCKS5 proxy (RFC 1928 §7): a TCP control connection asks
 * for UDP ASSOCIATE; the reply names the relay's address; datagrams go
 * there framed as RSV(2) FRAG(1) ATYP ADDR PORT DATA. The association lives
 * as long as the control connection: when the proxy closes it, sends fail. */

#define HDR_MAX (3 + 1 + 1 + 255 + 2)

static void
on_ctl(void *arg)
{
    struct outbound_udp *u = arg;
    uint8_t b[256];
    ssize_t n = io_read(u->ctl, b, sizeof(b));
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
        u->ctl_closed = 1; /* the association is over */
        io_read_stop(u->ctl);
    }
}

/* The relay's address from the reply; an unspecified one means the proxy's
 * own address (what the control connection reached). */
static int
relay_addr(struct outbound_udp *u, const uint8_t *reply, size_t len, struct flow_addr *out)
{
    if (len < 4 || outbound_addr_parse(reply + 3, len - 3, out) <= 0)
        return -1;
    static const uint8_t zero[16];
    int unspecified = (out->kind == FLOW_ADDR_IP4 && memcmp(out->ip, zero, 4) == 0) ||
                      (out->kind == FLOW_ADDR_IP6 && memcmp(out->ip, zero, 16) == 0);
    if (!unspecified && out->kind != FLOW_ADDR_NAME)
        return 0;
    struct sockaddr_storage peer;
    socklen_t pl = sizeof(peer);
    if (getpeername(u->ctl_fd, (struct sockaddr *)&peer, &pl) != 0)
        return -1;
    uint16_t port = out->port;
    if (peer.ss_family == AF_INET) {
        out->kind = FLOW_ADDR_IP4;
        memcpy(out->ip, &((struct sockaddr_in *)&peer)->sin_addr, 4);
    } else {
        out->kind = FLOW_ADDR_IP6;
        memcpy(out->ip, &((struct sockaddr_in6 *)&peer)->sin6_addr, 16);
    }
    out->port = port;
    return 0;
}

static void
on_associated(void *arg, int err, const char *why, const uint8_t *reply, size_t len)
{
    struct outbound_udp *u = arg;
    u->hs = NULL;
    struct flow_addr relay;
    if (err != 0) {
        u->why = why;
    } else if (relay_addr(u, reply, len, &relay) != 0) {
        u->why = "socks5: malformed UDP ASSOCIATE reply";
    } else {
        int fd = outbound_direct_udp(u->env, &relay);
        if (fd < 0) {
            u->why = strerror(-fd);
        } else {
            u->fd = fd;
            io_set_callbacks(u->ctl, on_ctl, NULL, u);
            io_read_start(u->ctl);
        }
    }
    outbound_udp_deliver(u);
}

static void
on_ctl_connected(void *arg, int fd, int err, const char *why)
{
    struct outbound_udp *u = arg;
    u->oc = NULL;
    if (fd < 0) {
        u->why = why;
        outbound_udp_deliver(u);
        return;
    }
    u->ctl_fd = fd;
    u->ctl = io_fd_new(u->env->loop, fd);
    if (u->ctl == NULL) {
        close(fd);
        u->why = "out of memory";
        outbound_udp_deliver(u);
        return;
    }
    u->hs = outbound_socks5_associate(u->ctl, u->p, on_associated, u);
    if (u->hs == NULL) {
        u->why = "out of memory";
        outbound_udp_deliver(u);
    }
}

int
outbound_udp_socks5_start(struct outbound_udp *u)
{
    u->oc = outbound_direct_connect(u->env, &u->p->server, 10.0, on_ctl_connected, u);
    return u->oc == NULL ? -1 : 0;
}

void
outbound_udp_socks5_stop(struct outbound_udp *u)
{
    if (u->oc != NULL)
        outbound_connect_cancel(u->oc);
    if (u->hs != NULL)
        outbound_hs_cancel(u->hs);
    if (u->ctl != NULL)
        io_close(u->ctl, 0);
    u->oc = NULL, u->hs = NULL, u->ctl = NULL;
}

ssize_t
outbound_udp_socks5_send(struct outbound_udp *u, const void *payload, size_t len)
{
    if (u->ctl_closed) {
        errno = ECONNRESET;
        return -1;
    }
    uint8_t *b = outbound_udp_seal_buf();
    b[0] = b[1] = b[2] = 0;
    int n = outbound_addr_write(b + 3, HDR_MAX - 3, &u->dst);
    if (n < 0 || 3 + (size_t)n + len > OUTBOUND_UDP_SEAL_CAP) {
        errno = EMSGSIZE;
        return -1;
    }
    memcpy(b + 3 + n, payload, len);
    return send(u->fd, b, 3 + (size_t)n + len, 0) < 0 ? -1 : (ssize_t)len;
}

ssize_t
outbound_udp_socks5_unwrap(struct outbound_udp *u, uint8_t *buf, size_t n, size_t *off)
{
    (void)u;
    struct flow_addr from;
    /* Fragments (FRAG != 0) are not reassembled: RFC 1928 lets us drop them. */
    int a = n >= 4 && buf[0] == 0 && buf[1] == 0 && buf[2] == 0
                ? outbound_addr_parse(buf + 3, n - 3, &from)
                : -1;
    if (a <= 0) {
        errno = EPROTO;
        return -1;
    }
    *off = 3 + (size_t)a;
    return (ssize_t)(n - *off);
}

