#ifndef CHUTE_FLOW_SESSION_H
#define CHUTE_FLOW_SESSION_H

/* The steps of a flow's life every inbound shares (the TUN's TCP in
 * flow/tcp.c, the SOCKS5 and HTTP listeners): open the decided flow's
 * upstream through its policy, then hand client and upstream to the one
 * relay. The name and decide steps are the flow_env's (flow.h), the sniff
 * step flow_sniff_step (sniff.h). */

#include <stddef.h>
#include <stdint.h>

#include "flow/flow.h"

struct io_stream;
struct flow_relay;

/* What an open delivers: the upstream's stream (the callee's), with the
 * bytes a proxy sent past its reply (the destination's, valid during the
 * callback); or an error, |err| an errno value and |why| a static text,
 * already logged as the flow's connect failure. ECANCELED: the flow was
 * decided again once its name resolved (IP rules) and is now REJECTed;
 * the inbound refuses it as it refuses any REJECT. */
struct flow_upstream {
    struct io_stream *stream;
    const uint8_t *extra;
    size_t extra_len;
    int err;
    const char *why;
};
typedef void (*flow_open_cb)(void *arg, const struct flow_upstream *u);
struct flow_open;

/* Opens |f|'s upstream through f->policy (|local|: chute's own listeners,
 * unmarked) within the env's connect timeout, and sets f->via to what a
 * group picked. The callback fires once, never from inside this call,
 * unless cancelled; |f| must outlive it. NULL when out of memory. */
struct flow_open *flow_open(const struct flow_env *e, struct flow *f, int local, flow_open_cb cb,
                            void *arg);
void flow_open_cancel(struct flow_open *o);

/* Relays the client |client| with the upstream |u| delivered: |reply|
 * goes to the client first, then the proxy's early bytes, and |pre_up| to
 * the upstream first; bytes are counted on |f| (the early bytes too).
 * Same contract as flow_relay_start: on failure both streams are still the
 * caller's. */
int flow_relay_upstream(struct flow_relay *r, const struct flow_env *e, struct io_stream *client,
                        const struct flow_upstream *u, const void *pre_up, size_t pre_up_len,
                        const void *reply, size_t reply_len, struct flow *f,
                        void (*done)(struct flow_relay *, void *, const char *), void *arg);

#endif
