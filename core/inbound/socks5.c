#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/log.h"
#include "flow/relay.h"
#include "flow/session.h"
#include "flow/sniff.h"
#include "io/io.h"
#include "inbound/inbound.h"
#include "inbound/socks5.h"

/* One SOCKS5 client: greeting, optional RFC 1929 auth, CONNECT, then the
 * flow is routed by the script and relayed with splice. Every malformed
 * step gets its protocol reply and a close. */

/* SNIFFING: the request named an address and route() asked for the host:
 * the client is told "connected" at once, its first bytes are read (and
 * kept) until they name the host (TLS SNI, HTTP Host) or FLOW_SNIFF_WAIT passes,
 * then route() decides again and the upstream connects; a failure then can
 * only close the connection (with a reset). */
enum state { GREETING, AUTH, REQUEST, CONNECTING, RELAY, SNIFFING, SNIFF_CONNECT };


struct conn {
    struct inbound_conn base;
    int fd;
    enum state state;
    ev_io io;
    ev_timer timer; /* handshake deadline */
    struct flow flow;
    int flow_added;
    struct flow_open *oc;
    struct flow_relay relay;
    size_t len;
    uint8_t buf[600]; /* the largest request: 4 + 1 + 255 + 2, auth: 513 */
    uint8_t *sniff;   /* SNIFFING: the client's first bytes */
    size_t sniff_len;
};

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

static const struct flow_env *
env_of(struct conn *c)
{
    return inbound_env(c->base._l);
}

static void
conn_free(struct conn *c, const char *reason)
{
    const struct flow_env *e = env_of(c);
    ev_io_stop(e->loop, &c->io);
    ev_timer_stop(e->loop, &c->timer);
    if (c->oc != NULL)
        flow_open_cancel(c->oc);
    if (c->state == RELAY)
        flow_relay_stop(&c->relay);
    else if (c->fd >= 0)
        close(c->fd);
    if (c->flow_added)
        flow_table_remove(e->flows, &c->flow, io_mono_now(), reason);
    inbound_conn_unlink(&c->base);
    free(c->sniff);
    free(c);
}

/* The flow table's calls. */
static const char *
owner_state(const struct flow *f, void *arg)
{
    const struct conn *c = arg;
    return c->state == RELAY ? "relay" : c->state == SNIFFING ? "sniffing" : "connecting";
}

static void
owner_close(struct flow *f, void *arg, const char *reason)
{
    conn_free(arg, reason);
}

static const struct flow_owner_ops owner = {.state = owner_state, .close = owner_close};

static void
close_conn(struct inbound_conn *base)
{
    conn_free((struct conn *)base, "shutdown");
}

/* Small replies go straight out: the socket's buffer is empty at this point
 * of the handshake, so a short write means the client is gone. */
static int
send_all(struct conn *c, const void *p, size_t n)
{
    return send(c->fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

static void
fail(struct conn *c, uint8_t rep, const char *reason)
{
    uint8_t out[22];
    size_t n = inbound_socks5_write_reply(out, rep, NULL);
    send_all(c, out, n);
    conn_free(c, reason);
}

static uint8_t
rep_for_errno(int err)
{
    switch (err) {
    case ECONNREFUSED:
        return SOCKS5_REP_REFUSED;
    case ECANCELED: /* REJECTed once the name resolved (flow/session.h) */
        return SOCKS5_REP_NOT_ALLOWED;
    case ENETUNREACH:
        return SOCKS5_REP_NET_UNREACH;
    case EHOSTUNREACH:
    case ETIMEDOUT:
        return SOCKS5_REP_HOST_UNREACH;
    default:
        return SOCKS5_REP_FAILURE;
    }
}

static void
on_relay_done(struct flow_relay *r, void *arg, const char *reason)
{
    struct conn *c = arg;
    c->fd = -1; /* the relay closed both sockets */
    conn_free(c, reason);
}

static void
on_connected(void *arg, const struct flow_upstream *r)
{
    struct conn *c = arg;
    const struct flow_env *e = env_of(c);
    c->oc = NULL;
    if (c->state == SNIFF_CONNECT) {
        /* The reply went out before the connect: the held bytes go first. */
        if (r->err != 0) {
                io_close_reset(c->fd);
            c->fd = -1;
            conn_free(c, "connect failed");
            return;
        }
        if (inbound_relay_upstream(&c->relay, e, c->fd, r, c->sniff, c->sniff_len, NULL, 0,
                                   &c->flow, on_relay_done, c) != 0) {
            io_close(r->stream, 1);
            conn_free(c, "out of memory");
            return;
        }
        free(c->sniff);
        c->sniff = NULL;
        c->state = RELAY;
        return;
    }
    if (r->err != 0) {
        fail(c, rep_for_errno(r->err), r->err == ECANCELED ? "rejected" : "connect failed");
        return;
    }
    struct sockaddr_storage bnd;
    socklen_t len = sizeof(bnd);
    uint8_t reply[22];
    if (getsockname(io_base_fd(r->stream), (struct sockaddr *)&bnd, &len) != 0)
        memset(&bnd, 0, sizeof(bnd));
    size_t n = inbound_socks5_write_reply(reply, SOCKS5_REP_OK, (struct sockaddr *)&bnd);
    /* Bytes the client sent after its request (optimistic data) go first. */
    if (inbound_relay_upstream(&c->relay, e, c->fd, r, c->buf, c->len, reply, n, &c->flow,
                               on_relay_done, c) != 0) {
        io_close(r->stream, 1);
        fail(c, SOCKS5_REP_FAILURE, "out of memory");
        return;
    }
    c->state = RELAY;
}

static void
consume(struct conn *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

/* Decides the sniffed flow again, with its host if one came, and connects.
 * Returns -1 if |c| was freed. */
static int
sniff_decide(struct conn *c, const char *name)
{
    const struct flow_env *e = env_of(c);
    ev_io_stop(e->loop, &c->io);
    ev_timer_stop(e->loop, &c->timer);
    if (name != NULL)
        c->flow.sniffed = strdup(name);
    c->flow._sniffable = 0;
    e->decide(e->ud, &c->flow);
    if (c->flow.policy == FLOW_POLICY_REJECT) {
        io_close_reset(c->fd);
        c->fd = -1;
        conn_free(c, "rejected");
        return -1;
    }
    c->state = SNIFF_CONNECT;
    c->oc = flow_open(e, &c->flow, 0, on_connected, c);
    if (c->oc == NULL) {
        conn_free(c, "out of memory");
        return -1;
    }
    return 0;
}

/* Looks for a name in the bytes read so far; -1 if |c| was freed. */
static int
sniff_step(struct conn *c, int eof)
{
    char name[256];
    if (!flow_sniff_step(c->sniff, c->sniff_len, eof, name, sizeof(name)))
        return 0;
    flow_sniff_log(&c->flow, name[0] ? name : NULL, c->sniff_len, 0);
    return sniff_decide(c, name[0] ? name : NULL);
}

static void
on_sniff_read(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = CONTAINER(w, struct conn, io);
    ssize_t n = recv(c->fd, c->sniff + c->sniff_len, FLOW_SNIFF_MAX - c->sniff_len, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n > 0)
        c->sniff_len += (size_t)n;
    sniff_step(c, n <= 0);
}

/* The client hears "connected" now; its first bytes will name the host. */
static int
sniff_start(struct conn *c)
{
    const struct flow_env *e = env_of(c);
    uint8_t reply[22];
    size_t n = inbound_socks5_write_reply(reply, SOCKS5_REP_OK, NULL);
    c->sniff = malloc(FLOW_SNIFF_MAX);
    if (c->sniff == NULL || send_all(c, reply, n) != 0) {
        conn_free(c, c->sniff ? "client gone" : "out of memory");
        return -1;
    }
    memcpy(c->sniff, c->buf, c->len); /* bytes that came with the request */
    c->sniff_len = c->len;
    c->len = 0;
    c->state = SNIFFING;
    ev_timer_stop(e->loop, &c->timer);
    ev_timer_set(&c->timer, FLOW_SNIFF_WAIT, 0);
    ev_timer_start(e->loop, &c->timer);
    ev_set_cb(&c->io, on_sniff_read);
    ev_io_start(e->loop, &c->io);
    return c->sniff_len > 0 ? sniff_step(c, 0) : 0;
}

/* Runs the handshake over what is buffered. Returns -1 if |c| was freed. */
static int
advance(struct conn *c)
{
    const struct flow_env *e = env_of(c);
    for (;;) {
        int n;
        if (c->state == GREETING) {
            uint8_t methods[32];
            n = inbound_socks5_parse_greeting(c->buf, c->len, methods);
            if (n == SOCKS5_NEED_MORE)
                return 0;
            if (n < 0) {
                /* A version-5 greeting we cannot use gets "no acceptable
                 * method"; another version gets nothing (it speaks no SOCKS5). */
                static const uint8_t none[2] = {5, SOCKS5_METHOD_NONE};
                if (n == SOCKS5_ERR_BAD)
                    send_all(c, none, 2);
                conn_free(c, "bad greeting");
                return -1;
            }
            consume(c, (size_t)n);
            int auth = inbound_auth_required(c->base._l);
            uint8_t want = auth ? SOCKS5_METHOD_USERPASS : SOCKS5_METHOD_NOAUTH;
            int offered = (methods[want / 8] >> (want % 8)) & 1;
            uint8_t reply[2] = {5, offered ? want : SOCKS5_METHOD_NONE};
            if (send_all(c, reply, 2) != 0 || !offered) {
                conn_free(c, offered ? "client gone" : "no acceptable method");
                return -1;
            }
            c->state = auth ? AUTH : REQUEST;
        } else if (c->state == AUTH) {
            struct mem_slice user, pass;
            n = inbound_socks5_parse_userpass(c->buf, c->len, &user, &pass);
            if (n == SOCKS5_NEED_MORE)
                return 0;
            int ok = n > 0 && inbound_auth_check(&c->base, user.ptr, user.len, pass.ptr, pass.len);
            uint8_t reply[2] = {1, ok ? 0 : 1};
            if (send_all(c, reply, 2) != 0 || !ok) {
                if (!ok)
                    LOG_INFO("socks5: authentication failed (user '%.*s')", n > 0 ? (int)user.len : 0,
                             n > 0 ? user.ptr : "");
                conn_free(c, ok ? "client gone" : "auth failed");
                return -1;
            }
            consume(c, (size_t)n);
            c->state = REQUEST;
        } else if (c->state == REQUEST) {
            uint8_t cmd, rep = SOCKS5_REP_FAILURE;
            n = inbound_socks5_parse_request(c->buf, c->len, &cmd, &c->flow.dst, &rep);
            if (n == SOCKS5_NEED_MORE)
                return 0;
            if (n < 0) {
                fail(c, rep, "bad request");
                return -1;
            }
            if (cmd != SOCKS5_CMD_CONNECT) {
                fail(c, SOCKS5_REP_CMD_UNSUPPORTED, "command not supported");
                return -1;
            }
            consume(c, (size_t)n);
            inbound_conn_ready(&c->base);
            ev_io_stop(e->loop, &c->io);
            flow_table_add(e->flows, &c->flow, io_mono_now());
            flow_set_owner(&c->flow, &owner, c);
            c->flow_added = 1;
            if (e->name(e->ud, &c->flow) != 0) { /* a fake IP whose name is gone */
                fail(c, SOCKS5_REP_HOST_UNREACH, "fake IP without a name");
                return -1;
            }
            c->flow._sniffable = c->flow.dst.kind != FLOW_ADDR_NAME;
            e->decide(e->ud, &c->flow);
            if ((c->flow._reads & FLOW_READ_HOST) && c->flow._sniffable)
                return sniff_start(c);
            if (c->flow.policy == FLOW_POLICY_REJECT) {
                fail(c, SOCKS5_REP_NOT_ALLOWED, "rejected");
                return -1;
            }
            c->state = CONNECTING;
            c->oc = flow_open(e, &c->flow, 0, on_connected, c);
            if (c->oc == NULL) {
                fail(c, SOCKS5_REP_FAILURE, "out of memory");
                return -1;
            }
            return 0;
        } else {
            return 0;
        }
    }
}

static void
on_read(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = CONTAINER(w, struct conn, io);
    ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        conn_free(c, "client closed during handshake");
        return;
    }
    if (n < 0)
        return;
    c->len += (size_t)n;
    if (advance(c) == 0 && c->len == sizeof(c->buf) && c->state != CONNECTING)
        fail(c, SOCKS5_REP_FAILURE, "handshake too long");
}

static void
on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct conn *c = CONTAINER(w, struct conn, timer);
    if (c->state == SNIFFING) {
        flow_sniff_log(&c->flow, NULL, c->sniff_len, 1);
        sniff_decide(c, NULL); /* no name in time: decide without one */
        return;
    }
    if (c->state == CONNECTING || c->state == RELAY || c->state == SNIFF_CONNECT)
        return;
    inbound_conn_timed_out(&c->base);
    conn_free(c, "handshake timeout");
}

void
inbound_socks5_accept(struct inbound_listener *l, int fd, const struct sockaddr_storage *peer)
{
    inbound_socks5_accept_within(l, fd, peer, inbound_env(l)->opts->connect_timeout);
}

void
inbound_socks5_accept_within(struct inbound_listener *l, int fd,
                             const struct sockaddr_storage *peer, double secs)
{
    const struct flow_env *e = inbound_env(l);
    struct conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        return;
    }
    c->fd = fd;
    c->base._close = close_conn;
    inbound_flow_init(&c->flow, FLOW_IN_SOCKS, fd, peer);
    inbound_conn_link(l, &c->base, peer);
    ev_io_init(&c->io, on_read, fd, EV_READ);
    ev_io_start(e->loop, &c->io);
    ev_timer_init(&c->timer, on_timeout, secs > 0 ? secs : 0.001, 0);
    ev_timer_start(e->loop, &c->timer);
}
