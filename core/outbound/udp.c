#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dns/dns.h"
#include <netinet/in.h>

#include "flow/addr.h"
#include "outbound/outbound.h"
#include "outbound/proxy.h"
#include "outbound/set.h"

/* UDP flows through a policy. DIRECT: one socket connected to the
 * destination (a name resolved first). Shadowsocks: one socket connected to
 * the server, each datagram sealed on its own with the destination inside
 * (a name goes to the server as a name). SOCKS5: UDP ASSOCIATE over a
 * control connection (udp_socks5.c), datagrams framed with the address. */

#include "outbound/udp_int.h"

static void on_rd(struct ev_loop *loop, ev_io *w, int revents);

void
outbound_udp_deliver(struct outbound_udp *u)
{
    outbound_udp_cb cb = u->cb;
    u->cb = NULL;
    if (u->why != NULL) {
        const char *why = u->why;
        void *arg = u->arg;
        outbound_udp_close(u);
        cb(arg, NULL, why);
        return;
    }
    cb(u->arg, u, NULL);
}

static void
on_later(struct ev_loop *loop, ev_idle *w, int revents)
{
    ev_idle_stop(loop, w);
    outbound_udp_deliver(CONTAINER(w, struct outbound_udp, later));
}

/* Connects the socket to |ip| (the destination or the proxy's server). */
static void
connect_to(struct outbound_udp *u, const struct flow_addr *ip)
{
    int fd = outbound_direct_udp(u->env, ip);
    if (fd < 0) {
        u->why = strerror(-fd);
        return;
    }
    u->fd = fd;
}

static void
on_resolved(void *arg, const char *err, const struct sockaddr_storage *addrs, size_t n)
{
    struct outbound_udp *u = arg;
    u->q = NULL;
    const struct flow_addr *target = u->p ? &u->p->server : &u->dst;
    if (err != NULL || n == 0) {
        u->why = err ? err : "name has no address";
    } else {
        struct flow_addr a = {.port = target->port};
        /* IPv4 first for UDP: no Happy Eyeballs to fall back with. */
        size_t pick = 0;
        for (size_t i = 0; i < n; i++)
            if (addrs[i].ss_family == AF_INET) {
                pick = i;
                break;
            }
        if (addrs[pick].ss_family == AF_INET) {
            a.kind = FLOW_ADDR_IP4;
            memcpy(a.ip, &((const struct sockaddr_in *)&addrs[pick])->sin_addr, 4);
        } else {
            a.kind = FLOW_ADDR_IP6;
            memcpy(a.ip, &((const struct sockaddr_in6 *)&addrs[pick])->sin6_addr, 16);
        }
        connect_to(u, &a);
    }
    outbound_udp_deliver(u);
}

struct outbound_udp *
outbound_udp_open(const struct outbound_env *env, int policy, const struct flow_addr *dst,
                  outbound_udp_cb cb, void *arg)
{
    struct outbound_udp *u = calloc(1, sizeof(*u));
    if (u == NULL)
        return NULL;
    u->ctl_fd = -1;
    ev_io_init(&u->rd, on_rd, -1, EV_READ);
    u->env = env;
    u->dst = *dst;
    u->fd = -1;
    u->cb = cb;
    u->arg = arg;
    ev_idle_init(&u->later, on_later);
    u->via = flow_policy_name(policy);
    if (env->set != NULL) {
        u->set = outbound_set_ref(env->set);
        policy = outbound_set_pick(u->set, policy, dst);
        u->p = outbound_set_proxy(u->set, policy);
        u->via = outbound_set_name(u->set, policy);
    }
    const struct flow_addr *target = dst;
    if (policy == FLOW_POLICY_REJECT) {
        u->why = "rejected by the group's choice";
    } else if (u->p != NULL && !u->p->udp) {
        u->why = u->p->type == OUTBOUND_HTTP ? "HTTP proxies carry no UDP"
                                             : "the proxy has udp = false";
    } else if (u->p != NULL && u->p->type == OUTBOUND_TROJAN) {
        if (outbound_udp_trojan_start(u, policy) != 0) {
            outbound_udp_close(u);
            return NULL;
        }
        return u;
    } else if (u->p != NULL && u->p->type == OUTBOUND_SOCKS5) {
        if (outbound_udp_socks5_start(u) != 0) {
            outbound_udp_close(u);
            return NULL;
        }
        return u;
    } else {
        target = u->p ? &u->p->server : dst;
        if (target->kind == FLOW_ADDR_NAME) {
            u->q = dns_resolve(env->dns, target->name, on_resolved, u);
            if (u->q == NULL) {
                outbound_udp_close(u);
                return NULL;
            }
            return u;
        }
        connect_to(u, target);
    }
    ev_idle_start(env->loop, &u->later);
    return u;
}

static void
on_rd(struct ev_loop *loop, ev_io *w, int revents)
{
    struct outbound_udp *u = w->data;

    u->on_readable(u->rd_arg);
}

void
outbound_udp_watch(struct outbound_udp *u, void (*on_readable)(void *), void *arg)
{
    u->on_readable = on_readable;
    u->rd_arg = arg;
    if (u->p != NULL && u->p->type == OUTBOUND_TROJAN) { /* datagrams ride the stream */
        outbound_udp_trojan_watch(u);
        return;
    }
    ev_io_init(&u->rd, on_rd, u->fd, EV_READ);
    u->rd.data = u;
    ev_io_start(u->env->loop, &u->rd);
}

const char *
outbound_udp_via(const struct outbound_udp *u)
{
    return u->via;
}

uint8_t *
outbound_udp_seal_buf(void)
{
    static _Thread_local uint8_t buf[OUTBOUND_UDP_SEAL_CAP];
    return buf;
}

ssize_t
outbound_udp_send(struct outbound_udp *u, const void *payload, size_t len)
{
    if (u->p == NULL)
        return send(u->fd, payload, len, 0);
    if (u->p->type == OUTBOUND_SOCKS5)
        return outbound_udp_socks5_send(u, payload, len);
    if (u->p->type == OUTBOUND_TROJAN)
        return outbound_udp_trojan_send(u, payload, len);
    uint8_t *b = outbound_udp_seal_buf();
    ssize_t n = outbound_ss_udp_seal(u->p, &u->dst, payload, len, b, OUTBOUND_UDP_SEAL_CAP);
    if (n < 0) {
        errno = EMSGSIZE;
        return -1;
    }
    return send(u->fd, b, (size_t)n, 0) < 0 ? -1 : (ssize_t)len;
}

ssize_t
outbound_udp_recv(struct outbound_udp *u, uint8_t *buf, size_t cap, size_t *off)
{
    if (u->p != NULL && u->p->type == OUTBOUND_TROJAN)
        return outbound_udp_trojan_recv(u, buf, cap, off);
    ssize_t n = recv(u->fd, buf, cap, 0);
    if (n < 0 || u->p == NULL) {
        *off = 0;
        return n;
    }
    if (u->p->type == OUTBOUND_SOCKS5)
        return outbound_udp_socks5_unwrap(u, buf, (size_t)n, off);
    struct flow_addr from;
    size_t plen;
    ssize_t at = outbound_ss_udp_open(u->p, buf, (size_t)n, &from, &plen);
    if (at < 0) {
        errno = EBADMSG;
        return -1;
    }
    *off = (size_t)at;
    return (ssize_t)plen;
}

void
outbound_udp_close(struct outbound_udp *u)
{
    if (u == NULL)
        return;
    ev_idle_stop(u->env->loop, &u->later);
    ev_io_stop(u->env->loop, &u->rd);
    outbound_udp_trojan_stop(u);
    outbound_udp_socks5_stop(u);
    if (u->q != NULL)
        dns_query_cancel(u->q);
    if (u->fd >= 0)
        close(u->fd);
    if (u->set != NULL)
        outbound_set_unref(u->set);
    free(u);
}
