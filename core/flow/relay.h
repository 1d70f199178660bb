#ifndef CHUTE_FLOW_RELAY_H
#define CHUTE_FLOW_RELAY_H

/* The byte relay between a flow's client stream and its upstream stream,
 * written once for every inbound and outbound. When both are bare sockets
 * (io_splice_fd() >= 0) it splices (relay.c: splice(2) through a pipe per
 * direction, HAProxy's kernel splicing): bytes never enter user space, and
 * at most one pipe's worth (64 KiB) is in flight per direction, which is
 * the back-pressure: a direction stops reading while its pipe cannot
 * drain. A FIN is passed on as shutdown(SHUT_WR) once the pipe is empty; a
 * reset on one side becomes a reset on the other.
 *
 * Otherwise stream mode (relay_stream.c): bytes pass through a user-space
 * buffer per direction (64 KiB, allocated on first use), with the same
 * back-pressure, half-close, idle and reset rules. */

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

struct flow_relay;
struct flow_relay_stream;
struct io_stream;

/* |reason| is a static string: "done", "reset", "idle", "error", and in
 * stream mode also "auth failed" (the stream reported EBADMSG: a bad AEAD
 * tag or TLS record, i.e. a wrong key or a tampered path; both sides were
 * reset). Compare with strcmp(). */
typedef void (*flow_relay_done_cb)(struct flow_relay *r, void *arg, const char *reason);

struct flow_relay_dir {
    ev_io _rd, _wr;        /* readable on src, writable on dst */
    int _src, _dst;
    int _pipe[2];          /* made on first use: idle flows hold no pipe */
    size_t _in_pipe;
    char *_pre;            /* bytes to send before any spliced byte */
    size_t _pre_len, _pre_off;
    int _eof, _shut;
    uint64_t *_count;      /* bytes delivered to dst */
    struct flow_relay *_r;
};

struct flow_relay {
    struct ev_loop *_loop;
    struct flow_relay_dir _up, _down; /* client->upstream, upstream->client */
    ev_timer _idle;
    double _idle_timeout, _last;
    flow_relay_done_cb _cb;
    void *_arg;
    int _running;
    struct flow_relay_stream *_st; /* stream mode's state; NULL in splice mode */
    /* Set when a flow_intercept took the streams instead (session.c):
     * stop and abort go to it. */
    const struct flow_intercept *_icpt;
    void *_icpt_state;
};

struct flow_relay_args {
    struct io_stream *client, *upstream;
    const void *pre_up;   /* sent to the upstream first (copied): bytes a client */
    size_t pre_up_len;    /* sent early, e.g. while its host was sniffed */
    const void *pre_down; /* sent to the client first (copied): a proxy reply */
    size_t pre_down_len;
    uint64_t *up_count;   /* bytes the upstream took, |pre_up| included */
    uint64_t *down_count; /* bytes delivered to the client, |pre_down| excluded */
    double idle;          /* seconds with no byte moved before "idle" */
    flow_relay_done_cb cb;
    void *arg;
};

/* Takes ownership of both streams (the relay sets their callbacks) and
 * relays until both directions end, an error, or |idle| seconds with no
 * byte moved; then stops, closes both (with a reset when one side reset,
 * a stream failed or on "auth failed") and calls |cb| once, from the loop.
 * A client EOF becomes the upstream's shutdown once every byte was taken,
 * and the other way round. Each direction moves at most 256 KiB per
 * wake-up before yielding to the loop. When both directions end ("done")
 * the streams are closed with close(0) right after their shutdown, so
 * close(0) must still send what a stream holds. Returns 0, or -1 when out
 * of memory (the streams are then still the caller's). */
int flow_relay_start(struct flow_relay *r, struct ev_loop *loop, const struct flow_relay_args *a);

/* Stops relaying and closes everything (close(0)) without calling the
 * callback. A no-op on a relay that is not running. */
void flow_relay_stop(struct flow_relay *r);
/* Called by a flow_intercept when the flow it took is over: the relay is
 * no longer running, and its callback gets |reason| (from the loop). */
void flow_relay_intercept_done(struct flow_relay *r, const char *reason);
/* The same with both sides reset (the engine's shutdown). */
void flow_relay_abort(struct flow_relay *r);

/* Internal to flow/: stream mode. */
int flow_relay_start_stream(struct flow_relay *r, struct ev_loop *loop,
                            const struct flow_relay_args *a);
void flow_relay_stream_stop(struct flow_relay *r, int reset);

#endif
