#ifndef CHUTE_OUTBOUND_OUTBOUND_H
#define CHUTE_OUTBOUND_OUTBOUND_H

/* Upstream connections. DIRECT: a non-blocking connect with a timeout,
 * names resolved off the loop, Happy Eyeballs (RFC 8305) across the
 * addresses of a name. Proxies (proxy.h) and policy groups (the set,
 * below) sit behind one call, outbound_open(). */

#include <ev.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>

#include "flow/flow-t.h"

struct dns_resolver;
struct tls_ctx;
struct outbound_set;
struct io_stream;

struct outbound_env {
    struct ev_loop *loop;
    struct dns_resolver *dns;
    /* How upstream sockets leave the machine without looping back into the
     * TUN: bound to an interface (SO_BINDTODEVICE) and/or marked for a
     * policy-routing rule (SO_MARK). "" / 0 for neither. */
    char interface[16];
    uint32_t fwmark;
    /* The embedding host's protect_socket (chute.h): when set, it is called
     * with each upstream socket before connect instead of the two above;
     * it returns 0 or an errno value. */
    int (*protect)(void *arg, int fd);
    void *protect_arg;
    /* 1 if |ss| is one of chute's own listeners (NULL: never asked): a
     * connection there would come back in as a new flow, which may be
     * routed out to it again, until descriptors run out (a proxy whose
     * name resolves here, a CONNECT to chute itself). Such an address is
     * not connected to: the open fails with ELOOP. */
    int (*is_self)(void *arg, const struct sockaddr_storage *ss);
    void *self_arg;
    /* The proxies and groups of the current bundle (NULL: none), and the
     * TLS context for Trojan and https proxies (NULL until one exists). */
    struct outbound_set *set;
    struct tls_ctx *tls;
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

/* What outbound_open() delivers: a stream to the destination (a socket's
 * for DIRECT and after SOCKS5 / HTTP CONNECT handshakes, which the relays
 * may splice; Shadowsocks, Trojan, TLS otherwise), or an error. */
struct outbound_result {
    struct io_stream *stream;      /* NULL on error; the callee's from now on */
    const uint8_t *extra;          /* bytes the proxy sent past its reply (the */
    size_t extra_len;              /* destination's): valid during the callback */
    int err;                       /* 0, or an errno value */
    const char *why;               /* static text when err != 0 */
    const char *via;               /* the proxy used ("DIRECT", "hk"); lives forever (interned) */
};
typedef void (*outbound_open_cb)(void *arg, const struct outbound_result *r);
struct outbound_open;

/* Opens a path to |dst| through |policy| (DIRECT, a proxy or a group of the
 * env's set; groups pick their member now). The callback fires exactly once,
 * never from inside this call, unless cancelled; the callee owns what it
 * delivers. REJECT is the caller's to handle. NULL when out of memory. */
struct outbound_open *outbound_open(const struct outbound_env *env, int policy,
                                    const struct flow_addr *dst, double timeout,
                                    outbound_open_cb cb, void *arg);
void outbound_open_cancel(struct outbound_open *o);
/* The same for a Trojan proxy's UDP: the stream carries datagrams. */
struct outbound_open *outbound_open_trojan_udp(const struct outbound_env *env, int policy,
                                               const struct flow_addr *dst, double timeout,
                                               outbound_open_cb cb, void *arg);

/* UDP through a policy (udp.c): DIRECT, or a proxy that carries UDP
 * (Shadowsocks). A name is resolved (DIRECT) or passed on (proxies); the
 * socket is connected to the destination or the proxy server. */
struct outbound_udp;
/* |u| is ready (the callee owns it), or NULL with |why|. */
typedef void (*outbound_udp_cb)(void *arg, struct outbound_udp *u, const char *why);
/* Starts; the callback fires once, never from inside, unless the returned
 * handle is closed first. NULL when out of memory. */
struct outbound_udp *outbound_udp_open(const struct outbound_env *env, int policy,
                                       const struct flow_addr *dst, outbound_udp_cb cb, void *arg);
/* Calls |on_readable| from the loop while datagrams (or an error) wait in
 * |u| (ready); the owner then calls outbound_udp_recv until EAGAIN. */
void outbound_udp_watch(struct outbound_udp *u, void (*on_readable)(void *), void *arg);
/* The proxy used, for logs ("DIRECT", "hk"). */
const char *outbound_udp_via(const struct outbound_udp *u);
/* Sends one datagram's payload; bytes sent or -1 with errno. */
ssize_t outbound_udp_send(struct outbound_udp *u, const void *payload, size_t len);
/* Receives one datagram into |buf|; returns the payload's length with its
 * offset in |*off|, or -1 with errno (EAGAIN; EBADMSG: dropped, failed
 * authentication; ECONNREFUSED: ICMP port unreachable). */
ssize_t outbound_udp_recv(struct outbound_udp *u, uint8_t *buf, size_t cap, size_t *off);
/* Closes (or abandons, before ready) and frees. */
void outbound_udp_close(struct outbound_udp *u);

/* Upstream streams that failed authentication (wrong key, corrupted or
 * forged bytes): the relays count each flow they close for it. */
void outbound_count_auth_failure(void);
uint64_t outbound_auth_failures(void);

#endif
