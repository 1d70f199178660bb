#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "outbound/proxy.h"
#include "io/io.h"
#include "outbound/udp_int.h"

/* UDP through a Trojan proxy: one TLS stream per flow opened with UDP
 * ASSOCIATE; each datagram is a frame [ATYP ADDR PORT][length BE16][CRLF]
 * [payload] in both directions. */

#define FRAME_HDR_MAX (1 + 1 + 255 + 2 + 2 + 2)
#define RX_CAP (65536 + FRAME_HDR_MAX)

static void
on_opened(void *arg, const struct outbound_result *r)
{
    struct outbound_udp *u = arg;
    u->op = NULL;
    if (r->err != 0) {
        u->why = r->why;
    } else {
        u->ctl = r->stream;
        u->rx = malloc(RX_CAP);
        if (u->rx == NULL)
            u->why = "out of memory";
    }
    outbound_udp_deliver(u);
}

int
outbound_udp_trojan_start(struct outbound_udp *u, int policy)
{
    u->op = outbound_open_trojan_udp(u->env, policy, &u->dst, 10.0, on_opened, u);
    return u->op == NULL ? -1 : 0;
}

void
outbound_udp_trojan_stop(struct outbound_udp *u)
{
    if (u->op != NULL)
        outbound_open_cancel(u->op);
    u->op = NULL;
    if (u->p != NULL && u->p->type == OUTBOUND_TROJAN && u->ctl != NULL) {
        io_close(u->ctl, 0);
        u->ctl = NULL;
    }
    free(u->rx);
    u->rx = NULL;
}

ssize_t
outbound_udp_trojan_send(struct outbound_udp *u, const void *payload, size_t len)
{
    uint8_t hdr[FRAME_HDR_MAX];
    int n = outbound_addr_write(hdr, sizeof(hdr) - 4, &u->dst);
    if (n < 0 || len > 0xffff) {
        errno = EMSGSIZE;
        return -1;
    }
    hdr[n] = (uint8_t)(len >> 8);
    hdr[n + 1] = (uint8_t)len;
    hdr[n + 2] = '\r';
    hdr[n + 3] = '\n';
    struct iovec iov[2] = {{hdr, (size_t)n + 4}, {(void *)payload, len}};
    size_t want = (size_t)n + 4 + len;
    ssize_t w = io_writev(u->ctl, iov, 2);
    if (w < 0 && errno == EPIPE)
        errno = ECONNRESET; /* the stream is over: a new association */
    if (w < 0)
        return -1;
    if ((size_t)w < want) { /* a datagram cut in the stream would garble the rest */
        errno = ECONNRESET;
        return -1;
    }
    return (ssize_t)len;
}

/* see udp_int.h */
int
outbound_udp_trojan_frame(const uint8_t *p, size_t n, size_t *off, size_t *len)
{
    struct flow_addr from;
    int a = outbound_addr_parse(p, n, &from);
    if (a <= 0)
        return a;
    if (n < (size_t)a + 4)
        return 0;
    size_t l = (size_t)p[a] << 8 | p[a + 1];
    if (p[a + 2] != '\r' || p[a + 3] != '\n')
        return -1;
    if (n < (size_t)a + 4 + l)
        return 0;
    *off = (size_t)a + 4;
    *len = l;
    return 1;
}

static void
on_stream_readable(void *arg)
{
    struct outbound_udp *u = arg;

    u->on_readable(u->rd_arg);
}

void
outbound_udp_trojan_watch(struct outbound_udp *u)
{
    io_set_callbacks(u->ctl, on_stream_readable, NULL, u);
    io_read_start(u->ctl);
}

ssize_t
outbound_udp_trojan_recv(struct outbound_udp *u, uint8_t *buf, size_t cap, size_t *off)
{
    for (;;) {
        size_t at, len;
        int f = outbound_udp_trojan_frame(u->rx, u->rx_len, &at, &len);
        if (f < 0) {
            errno = ECONNRESET; /* out of step with the stream: start over */
            return -1;
        }
        if (f > 0) {
            size_t n = len < cap ? len : cap;
            memcpy(buf, u->rx + at, n);
            u->rx_len -= at + len;
            memmove(u->rx, u->rx + at + len, u->rx_len);
            *off = 0;
            return (ssize_t)n;
        }
        if (u->rx_len == RX_CAP) {
            errno = ECONNRESET;
            return -1;
        }
        ssize_t r = io_read(u->ctl, u->rx + u->rx_len, RX_CAP - u->rx_len);
        if (r == 0) {
            errno = ECONNRESET;
            return -1;
        }
        if (r < 0)
            return -1;
        u->rx_len += (size_t)r;
    }
}
