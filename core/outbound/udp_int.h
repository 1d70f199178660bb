#ifndef CHUTE_OUTBOUND_UDP_INT_H
#define CHUTE_OUTBOUND_UDP_INT_H

/* Private to udp.c, udp_socks5.c and udp_trojan.c. */

#include "outbound/outbound.h"

struct outbound_udp {
    const struct outbound_env *env;
    struct outbound_set *set;       /* a reference: keeps |p| alive */
    const struct outbound_proxy *p; /* NULL: DIRECT */
    struct flow_addr dst;
    int fd;
    ev_io rd;                       /* readable: the owner's on_readable */
    void (*on_readable)(void *arg);
    void *rd_arg;
    struct dns_query *q;
    ev_idle later;
    const char *why;                /* the failure to deliver, or NULL */
    const char *via;
    outbound_udp_cb cb;
    void *arg;
    /* SOCKS5: the control connection that keeps the association alive. */
    struct outbound_connect *oc;
    struct io_stream *ctl;
    struct outbound_hs *hs;
    int ctl_fd;                     /* the control socket, inside |ctl| */
    int ctl_closed;
    /* Trojan: the stream itself carries the datagrams. */
    struct outbound_open *op;
    uint8_t *rx;
    size_t rx_len;
};

/* The datagram a Shadowsocks or SOCKS5 mapping sends is built here and sent
 * at once, so one buffer per thread serves every mapping. It was a member:
 * 66.5 KiB per mapping, DIRECT too, mostly untouched; thousands of mappings
 * coming and going made a heap of such holes that small allocations kept
 * touching, and RSS crept up for hours (scripts/soak). */
#define OUTBOUND_UDP_SEAL_CAP (65536 + 512)
uint8_t *outbound_udp_seal_buf(void);

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

/* Calls the open's callback once: |u| ready, or u->why (|u| closed). */
void outbound_udp_deliver(struct outbound_udp *u);

/* udp_socks5.c */
int outbound_udp_socks5_start(struct outbound_udp *u);
void outbound_udp_socks5_stop(struct outbound_udp *u);
ssize_t outbound_udp_socks5_send(struct outbound_udp *u, const void *payload, size_t len);
ssize_t outbound_udp_socks5_unwrap(struct outbound_udp *u, uint8_t *buf, size_t n, size_t *off);

/* udp_trojan.c */
int outbound_udp_trojan_start(struct outbound_udp *u, int policy);
void outbound_udp_trojan_stop(struct outbound_udp *u);
ssize_t outbound_udp_trojan_send(struct outbound_udp *u, const void *payload, size_t len);
ssize_t outbound_udp_trojan_recv(struct outbound_udp *u, uint8_t *buf, size_t cap, size_t *off);
void outbound_udp_trojan_watch(struct outbound_udp *u);
/* One whole frame from the |n| bytes read so far at |p|: 1 with its
 * payload's offset and length, 0 when more bytes are needed, -1 when
 * malformed. spec/fuzz/udp_trojan_fuzz.c calls it directly. */
int outbound_udp_trojan_frame(const uint8_t *p, size_t n, size_t *off, size_t *len);

#endif
