#ifndef CHUTE_MITM_H2_INT_H
#define CHUTE_MITM_H2_INT_H

/* Internal to mitm/: HTTP/2 through the MITM. nghttp2 owns framing, HPACK
 * and stream state on both legs; chute glues them together:
 *   h2_msg.c       an h2 header block <-> the struct http_fwd_req/resp the
 *                  hooks edit (the same hooks as HTTP/1.1)
 *   h2_io.c        one nghttp2 session over one io stream (read, write with
 *                  back-pressure, deferred flush and teardown)
 *   h2_server.c    the client's side: one server session per TLS
 *                  connection whose ALPN is h2
 *   h2_upstream.c  the origins' side: client sessions shared by every
 *                  client connection with the same key
 *
 * One exchange (struct h2x) joins a client stream and an upstream stream.
 * Bytes of a body sit in the exchange's buffer only until the other
 * session takes them, and each session's receive window reopens
 * (nghttp2_session_consume) only for bytes the other side took: a slow
 * reader holds at most one stream window of its stream's bytes. The
 * stream window narrows when the streams alive would let more than
 * mitm_opts.h2_max_buffered in, all sessions together (h2_mem.c). */

#include <ev.h>
#include <nghttp2/nghttp2.h>

#include "mitm/mitm_int.h"

/* Per stream: what nghttp2 lets a peer send before we consume (bytes). */
#define H2_STREAM_WINDOW (256 * 1024)
/* Per connection (sum of its streams' unconsumed bytes). */
#define H2_CONN_WINDOW (4 * 1024 * 1024)
/* Concurrent client streams per client connection. */
#define H2_MAX_STREAMS 128
/* Header block limits (HPACK bombs, header floods). */
#define H2_MAX_HEADER_LIST (64 * 1024)
#define H2_MAX_FIELDS 128
/* Seconds an unused upstream h2 connection stays open. */
#define H2_UP_IDLE 30.0

/* ---- h2_msg.c ------------------------------------------------------------ */

/* A header list as nghttp2 hands it over, copied into an arena. */
struct h2_fields {
    nghttp2_nv *v;
    size_t n, cap;
    size_t bytes;
};

/* Appends one field (name and value copied into |a|). 0, -1 when out of
 * memory or over H2_MAX_FIELDS / H2_MAX_HEADER_LIST. */
int h2_fields_add(struct h2_fields *f, struct mem_arena *a, const uint8_t *name, size_t nlen,
                  const uint8_t *value, size_t vlen);

/* Turns a request header block into |req| (http_fwd_request_init over an
 * HTTP/1.1 head built from :method, :path, :authority and the fields, so
 * the hooks see what an h1 request would give them). |host|/|port| name
 * the origin when :authority is absent. 0 with req->refused set for a
 * request no one can forward (missing pseudo-fields, CONNECT), -1 when out
 * of memory. |has_body|: the stream did not end with its headers. */
int h2_msg_request(struct http_fwd_req *req, struct mem_arena *a, const struct h2_fields *in,
                   struct mem_slice host, uint16_t port, int has_body);
/* The request as nghttp2 sends it upstream: pseudo-fields first, then
 * the (edited) fields minus the connection-specific ones. */
int h2_msg_request_nv(const struct http_fwd_req *req, struct mem_arena *a, nghttp2_nv **out,
                      size_t *n);
/* A response header block (:status and fields) as an http_fwd_resp a
 * response hook may edit. 0, HTTP_ERR_BAD for a bad :status, -1 on OOM. */
int h2_msg_response(struct http_fwd_resp *resp, struct mem_arena *a,
                    const struct http_fwd_req *req, const struct h2_fields *in);
/* The response as nghttp2 sends it to the client. */
int h2_msg_response_nv(const struct http_fwd_resp *resp, struct mem_arena *a, nghttp2_nv **out,
                       size_t *n);
/* A local answer (struct mitm_reply) as nv pairs: :status, |extra|'s
 * lines, content-length. */
int h2_msg_reply_nv(struct mem_arena *a, int status, const char *extra, size_t body_len,
                    nghttp2_nv **out, size_t *n);
/* Fields for an h1 peer from an h2 one drop these (RFC 9113 §8.2.2). */
int h2_msg_conn_specific(const uint8_t *name, size_t len);

/* ---- h2_io.c ------------------------------------------------------------- */

struct h2_io {
    nghttp2_session *ng;
    struct io_stream *io;
    struct ev_loop *loop;
    ev_prepare kick;         /* deferred flush / teardown, before the loop blocks */
    const uint8_t *out;      /* what mem_send gave and the stream has not taken */
    size_t out_len;
    int dead;                /* torn down at the next kick */
    int reading;
    const char *why;
    struct mitm_h2_mem *mem; /* the MITM's body bytes (h2_mem.c), once tracked */
    struct h2_io *m_prev, *m_next;
    int32_t window;          /* the SETTINGS_INITIAL_WINDOW_SIZE it last announced */
    void (*on_dead)(struct h2_io *io, const char *why); /* the owner frees itself */
};

void h2_io_init(struct h2_io *io, struct ev_loop *loop, struct io_stream *s,
                void (*on_dead)(struct h2_io *, const char *));
/* Sends what nghttp2 has, within what the stream takes; reads on. */
void h2_io_flush(struct h2_io *io);
/* A flush before the loop blocks (from another session's callbacks). */
void h2_io_kick(struct h2_io *io);
/* Ends the session at the next kick (never from inside its callbacks). */
void h2_io_fail(struct h2_io *io, const char *why);
/* Stops the watchers, closes the stream (and the session). */
void h2_io_fini(struct h2_io *io, int reset);
/* Counts the session in |mem|: its streams' window follows the MITM's
 * (the session announced H2_STREAM_WINDOW). */
void h2_io_track(struct h2_io *io, struct mitm_h2_mem *mem);
/* A settings + options set both roles share (consume-based windows). */
nghttp2_option *h2_io_options(int server);
/* The allocator both roles' sessions use (h2_alloc.c). */
nghttp2_mem *h2_alloc(void);

/* ---- a body's bytes between the two sessions ----------------------------- */

struct h2_buf {
    char *p;
    size_t off, len, cap;
    struct mitm_h2_mem *mem; /* where its bytes are counted */
};

/* ---- one exchange -------------------------------------------------------- */

struct h2_srv;
struct h2_up;

struct h2x {
    struct h2_srv *srv;   /* the client session, NULL once its stream closed */
    int32_t cid;
    struct h2_up *up;     /* the upstream connection, NULL before / after */
    int32_t uid;
    struct h2x *u_prev, *u_next; /* on the upstream's list (uid 0: waiting for it) */
    int got_final;             /* the final response head came (what follows: trailers) */
    int retried;               /* sent again after a GOAWAY refused it */
    size_t req_sent;           /* request body bytes that went upstream */
    struct mem_arena arena;
    struct h2_fields reqf, respf, trailf;
    struct http_fwd_req req;
    struct http_fwd_resp resp;
    struct mitm_request mreq;
    struct h2_buf reqb, respb; /* client -> origin, origin -> client */
    int req_eof, resp_eof;     /* the sending side ended its body */
    int req_deferred, resp_deferred; /* the data source waits for bytes */
    int resp_started;          /* the response head went to the client */
    int hooked_resp;
    int head;                  /* HEAD: no response body */
    int local;                 /* answered by a hook */
    const char *local_body;
    size_t local_len;
    /* Bodies a hook asked for (h2_body.c): read whole, up to |*_max|,
     * before the hooks run. Their bytes are consumed on the sending
     * session as they come (the buffer is bounded by the max, not the
     * window); |*_early| counts those, so what the other side takes later
     * is not consumed twice; |*_done|: nothing more is to be consumed. */
    struct mem_slice req_host; /* the request's authority before the hooks ran */
    uint16_t req_port;
    int req_collect, resp_collect;
    size_t req_max, resp_max;
    size_t req_early, resp_early;
    int req_early_all, resp_early_all;
    /* An origin that speaks only HTTP/1.1 (h2_h1.c): the exchange in its
     * place of an upstream stream; the response head came from it. */
    struct h2h1 *h1;
    int resp_h1;
};

/* Bytes of |b| (a body buffer) the sending session still has to be told
 * were consumed, out of |n| just taken or left over; updates |*early|. */
size_t h2_consume_due(size_t n, size_t *early, int all);
/* The cap a DATA frame's bytes may fill a body buffer to. */
#define H2_BUF_CAP(max) ((max) + H2_STREAM_WINDOW + 16384)

/* The exchange's buffers count in |mem| (set once, when it is made). */
void h2_x_mem_init(struct h2x *x, struct mitm_h2_mem *mem);
/* The bytes a DATA frame brought, kept for the other side. 0, -1 when the
 * buffer would pass |cap| (the peer ignored our window). */
int h2_buf_put(struct h2_buf *b, const uint8_t *p, size_t n, size_t cap);
/* Up to |max| bytes out of |b| into |dst|: how many. */
size_t h2_buf_take(struct h2_buf *b, uint8_t *dst, size_t max);
void h2_buf_free(struct h2_buf *b);

/* ---- h2_mem.c ------------------------------------------------------------ */

/* The narrowest stream window the cap may ask for (bytes). */
#define H2_MIN_WINDOW (16 * 1024)

/* The initial stream window sessions are to announce now. */
int32_t h2_mem_window(const struct mitm_h2_mem *mem);
/* The body bytes an HTTP/1.1 origin may have waiting for one stream. */
size_t h2_mem_h1_limit(const struct mitm_h2_mem *mem);
/* Held bytes went up / down by |n|. */
void h2_mem_add(struct mitm_h2_mem *mem, size_t n);
void h2_mem_sub(struct mitm_h2_mem *mem, size_t n);
/* An exchange begins (+1) or ends (-1): the window may change. */
void h2_mem_streams(struct mitm_h2_mem *mem, int delta);

/* ---- h2_server.c --------------------------------------------------------- */

/* Takes the client's TLS stream (ALPN h2) of |s|: 0, or -1 (the stream is
 * still the caller's). The session ends the flow through mitm_sess_end. */
int mitm_h2_server_start(struct mitm_sess *s, struct io_stream *tls);
void mitm_h2_server_free(struct h2_srv *srv);
/* From the upstream side: the response head is there (run hooks, submit),
 * body bytes came, or the upstream stream ended (|err|: its error code, or
 * -1 when the upstream connection failed before the stream opened). */
void mitm_h2_server_response(struct h2x *x);
void mitm_h2_server_data(struct h2x *x);
void mitm_h2_server_upstream_closed(struct h2x *x, int err, const char *why);
/* The upstream took request bytes: the client's window reopens. */
void mitm_h2_server_consumed(struct h2x *x, size_t n);

/* ---- h2_body.c ----------------------------------------------------------- */

/* Request side, from h2_server.c: the body bytes of a stream whose hooks
 * wait for it came (or its end): 1 when the hooks can run now (with the
 * body in x->mreq, or without it when it was over the max), else 0. */
int h2_body_request_step(struct h2x *x, int eof);
/* The hooks replaced the request body: it goes upstream instead. 0/-1. */
int h2_body_request_replace(struct h2x *x, const char *body, size_t len);
/* Response side: the same for the response body collected before the
 * head goes to the client; |body|/|len| get the collected body (NULL when
 * over the max). */
int h2_body_response_step(struct h2x *x, const char **body, size_t *len);
int h2_body_response_replace(struct h2x *x, const char *body, size_t len);

/* ---- h2_h1.c ------------------------------------------------------------- */

/* Sends |x| (headers done, hooks run) to an HTTP/1.1-only origin (over
 * TLS, or plain for a rewrite's http:// URL): over an idle connection of
 * the h1 pool, else a new one. 0, or -1 (out of memory, or a host that is
 * no usable name: answer 502). The rest as the h2 upstream's calls below. */
int mitm_h2h1_submit(struct mitm *m, const struct flow *f, const char *host, uint16_t port,
                     int plain, struct h2x *x);
void mitm_h2h1_consumed(struct h2x *x);
void mitm_h2h1_data(struct h2x *x);
void mitm_h2h1_cancel(struct h2x *x);

/* ---- h2_upstream.c ------------------------------------------------------- */

struct h2_pool;

struct h2_pool *mitm_h2_pool_new(struct mitm *m);
void mitm_h2_pool_free(struct h2_pool *p);
/* Hands a connection whose ALPN is h2 to the pool (it is shared from now
 * on). |f| is the flow it was opened for (copied: new connections of the
 * same key open through its policy). */
void mitm_h2_pool_adopt(struct mitm *m, const struct flow *f, const char *host, uint16_t port,
                        struct io_stream *tls);
/* 1 when an h2 connection for the key exists (open or opening). */
int mitm_h2_pool_has(struct mitm *m, const struct flow *f, const char *host, uint16_t port);
/* Sends |x| to an origin other than its flow's (a rewrite named it):
 * HTTP/1.1 for a plain URL, for an origin known to speak only that, or
 * one with an idle h1 connection and no h2 one; else h2, on a connection
 * that offers both and falls back to HTTP/1.1 (h2_h1.c) for every stream
 * that waited on it when the origin chose that. 0, or -1 as below. */
int mitm_h2_route(struct mitm *m, const struct flow *f, const char *host, uint16_t port,
                  int plain, struct h2x *x);
/* Sends the request of |x| (headers done, hooks run) on a connection of
 * the key: an open one with a free stream slot, else a new one. 0, or -1
 * (out of memory: answer 502). */
int mitm_h2_up_submit(struct mitm *m, const struct flow *f, const char *host, uint16_t port,
                      struct h2x *x);
/* The client took response bytes: the origin's window reopens. */
void mitm_h2_up_consumed(struct h2x *x, size_t n);
/* More request body bytes (or its end) are there. */
void mitm_h2_up_data(struct h2x *x);
/* The client's stream is gone: cancel the upstream one. */
void mitm_h2_up_cancel(struct h2x *x, uint32_t code);

#endif
