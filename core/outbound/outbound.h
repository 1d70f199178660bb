#ifndef CHUTE_OUTBOUND_OUTBOUND_H
#define CHUTE_OUTBOUND_OUTBOUND_H

/* Upstream connections. DIRECT for now: a non-blocking connect with a
 * timeout, names resolved off the loop, Happy Eyeballs (RFC 8305) across
 * the addresses of a name. Proxy protocols plug in beside it. */

#include <ev.h>

#include "flow/flow-t.h"

struct dns_resolver;

struct outbound_env {
    struct ev_loop *loop;
    struct dns_resolver *dns;
    /* How upstream sockets leave the machine without looping back into the
     * TUN: bound to an interface (SO_BINDTODEVICE) and/or marked for a
     * policy-routing rule (SO_MARK). "" / 0 for neither. */
    char interface[16];
    uint32_t fwmark;
};

struct outbound_connect;

/* |fd| is a connected non-blocking socket that the callee now owns, or -1
 * with |err| an errno value (ETIMEDOUT, ECONNREFUSED, EHOSTUNREACH, ...) and
 * |why| a static text ("name not found", "connect timeout", ...). */
typedef void (*outbound_connect_cb)(void *arg, int fd, int err, const char *why);

/* Connects to |dst|; the callback fires exactly once, never from inside this
 * call, unless cancelled. Returns NULL only when out of memory. */
struct outbound_connect *outbound_direct_connect(const struct outbound_env *env,
                                                 const struct flow_addr *dst, double timeout,
                                                 outbound_connect_cb cb, void *arg);
/* Stops the attempt and frees it; the callback is not called. */
void outbound_connect_cancel(struct outbound_connect *c);

/* A non-blocking UDP socket connected to |dst| (an IP), with the
 * interface and mark applied. Returns the fd or a negative errno. */
int outbound_direct_udp(const struct outbound_env *env, const struct flow_addr *dst);

/* A close that the peer sees as a reset (RST), not a FIN. */
void outbound_close_reset(int fd);

#endif
