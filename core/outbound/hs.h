#ifndef CHUTE_OUTBOUND_HS_H
#define CHUTE_OUTBOUND_HS_H

/* The I/O half shared by the SOCKS5 and HTTP CONNECT handshakes (socks5.c,
 * http.c): sends messages through the stream (queueing what it does not
 * take until on_drain), reads replies as the stream reports them readable
 * into the protocol's buffer, and delivers the result exactly once, never
 * from inside the start call. The protocol files only parse and decide. */

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "outbound/hs_wire.h"
#include "outbound/proxy.h"

struct outbound_hs_proto {
    /* Called after bytes were added to h->in: 0 to read on, 1 once it has
     * called outbound_hs_done or outbound_hs_fail (|h| is gone). */
    int (*step)(struct outbound_hs *h);
    const char *eof_why;  /* ECONNRESET: the proxy closed before replying */
    const char *io_why;   /* a read or send error on the stream */
};

/* Protocol files embed this first in their own struct. */
struct outbound_hs {
    const struct outbound_hs_proto *proto;
    struct io_stream *s;
    outbound_hs_cb cb;
    void *arg;
    int state;            /* the protocol's */
    int eof_err;          /* what EOF means now (a protocol may refine it) */
    const char *eof_why;
    ev_timer later;       /* delivers failures found inside the start call */
    int starting, err;
    const char *why;
    size_t out_off, out_len;
    uint8_t out[OUTBOUND_HTTP_REQUEST_MAX];
    uint8_t *in;          /* the protocol's reply buffer */
    size_t in_len, in_cap;
};

/* Allocates |size| bytes (the protocol's struct, this one first, its reply
 * buffer of |in_cap| bytes at offset |in_off|), takes over the stream's
 * callbacks until the end (then clears them and stops reading) and starts
 * reading. NULL when out of memory. */
struct outbound_hs *outbound_hs_new(struct io_stream *s, size_t size,
                                    const struct outbound_hs_proto *proto, size_t in_off,
                                    size_t in_cap, outbound_hs_cb cb, void *arg);
/* Ends the start call: failures are delivered directly from now on. */
struct outbound_hs *outbound_hs_started(struct outbound_hs *h);
/* Sends (or queues) |len| bytes. 0, or -1 when it failed (outside the start
 * call |h| is then gone). */
int outbound_hs_send(struct outbound_hs *h, const void *buf, size_t len);
/* Drops the first |n| bytes of h->in. */
void outbound_hs_consume(struct outbound_hs *h, size_t n);
/* Success: the bytes of h->in past the first |consumed| are the extra. */
void outbound_hs_done(struct outbound_hs *h, size_t consumed);
void outbound_hs_fail(struct outbound_hs *h, int err, const char *why);

#endif
