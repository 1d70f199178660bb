#ifndef CHUTE_FLOW_RELAY_H
#define CHUTE_FLOW_RELAY_H

/* Byte relay between two connected kernel sockets with splice(2) through a
 * pipe per direction (HAProxy's kernel splicing): bytes never enter user
 * space, and at most one pipe's worth (64 KiB) is in flight per direction,
 * which is the back-pressure: a direction stops reading while its pipe
 * cannot drain. A FIN is passed on as shutdown(SHUT_WR) once the pipe is
 * empty; a reset on one side becomes a reset on the other.
 *
 * Stream mode (relay_stream.c) relays a client socket to an outbound_stream
 * (Shadowsocks, TLS): plaintext passes through a user-space buffer per
 * direction (64 KiB, allocated on first use), with the same back-pressure,
 * half-close, idle and reset rules. */

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

struct flow_relay;
struct flow_relay_stream;
struct outbound_stream;

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
};

/* Takes ownership of |client_fd| and |up_fd| (both non-blocking, connected)
 * and relays until both directions end, an error, or |idle| seconds with no
 * byte moved; then stops, closes both sockets and calls |cb| once, from the
 * loop. |pre_up| / |pre_down| (copied) are sent first to the upstream / the
 * client: bytes a client sent early, a proxy reply. Byte counts go to
 * |*up_count| and |*down_count|. Returns 0, or -1 when out of memory (the
 * sockets are then still the caller's). */
int flow_relay_start(struct flow_relay *r, struct ev_loop *loop, int client_fd, int up_fd,
                     const void *pre_up, size_t pre_up_len, const void *pre_down,
                     size_t pre_down_len, uint64_t *up_count, uint64_t *down_count, double idle,
                     flow_relay_done_cb cb, void *arg);

/* Stream mode: as flow_relay_start, with the upstream an outbound_stream
 * |up| (owned from now on: the relay sets its on_drain, and closes it with a
 * reset when the client resets, the stream fails or on "auth failed").
 * |*up_count| counts bytes the stream accepted, |pre_up| included;
 * |*down_count| bytes delivered to the client, |pre_down| excluded (as in
 * splice mode). A client EOF becomes the stream's shutdown op once every
 * byte was taken; the stream's end becomes shutdown(SHUT_WR) on the client.
 * Each direction moves at most 256 KiB per wake-up before yielding to the
 * loop. When both directions end ("done") the stream is closed with
 * close(0) right after its shutdown op, so close(0) must still send what
 * the stream holds. Returns 0, or -1 when out of memory (|client_fd| and
 * |up| are then still the caller's). */
int flow_relay_start_stream(struct flow_relay *r, struct ev_loop *loop, int client_fd,
                            struct outbound_stream *up, const void *pre_up, size_t pre_up_len,
                            const void *pre_down, size_t pre_down_len, uint64_t *up_count,
                            uint64_t *down_count, double idle, flow_relay_done_cb cb, void *arg);

/* Stops relaying and closes everything (a plain close, the stream with
 * close(0)) without calling the callback, in either mode. A no-op on a
 * relay that is not running. */
void flow_relay_stop(struct flow_relay *r);

/* Internal: flow_relay_stop for stream mode, in relay_stream.c. */
void flow_relay_stream_stop(struct flow_relay *r);

#endif
