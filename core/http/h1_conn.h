#ifndef CHUTE_HTTP_H1_CONN_H
#define CHUTE_HTTP_H1_CONN_H

/* One HTTP/1 client connection forwarded exchange after exchange to an
 * upstream, over two io streams, with the rules of h1_forward.h. The HTTP
 * proxy inbound and the MITM share it; what differs between them is in
 * the hooks: where each request's upstream comes from (the route, an
 * outbound), whether it is answered locally (407, 403, a script's 204),
 * what a script rewrites.
 *
 * The life of a request:
 *  1. the head is read from the client (400 or 431 and close when it is
 *     malformed or too large, as the HTTP proxy answers);
 *  2. on_request_head(req) is called; the owner decides, inside the call or
 *     later, with exactly one of http_h1_conn_forward (over the upstream it
 *     keeps, or a new one), http_h1_conn_respond (a local answer), or
 *     http_h1_conn_release_client (CONNECT: the owner tunnels). Nothing
 *     moves, and the idle clock stops, until it has;
 *  3. the upstream head goes out, then the request body as framed, while
 *     the response is read: 1xx heads are passed on, on_response_head(resp)
 *     sees the final head, whose body then streams to the client;
 *  4. when the response is whole, the connection either reads the next
 *     request (the upstream kept, or dropped when it sent bytes past the
 *     response or closed: on_upstream_end), or ends ("done").
 *
 * Memory: between requests the connection holds no buffer and no arena
 * chunk; they come back with the next request's first bytes.
 *
 * Back-pressure both ways: a side is read only while what was read from it
 * has gone out to the other side, so at most one buffer per direction
 * (HTTP_MAX_HEAD + 16 KiB) is held whatever the peers' speeds; the side
 * that cannot write is resumed by its stream's on_drain. The client is not
 * read while a response is in flight after its request body (pipelined
 * requests wait in the socket); an upstream kept between requests is
 * watched, so one that closes (or talks out of turn) is dropped before the
 * next request could be sent into it.
 *
 * Errors: the upstream failing before any response byte reached the
 * client becomes "502 Bad Gateway" and close; after, the client connection
 * is closed ("upstream broke the response"). Done reasons are static
 * strings (compare with strcmp): "done", "idle", "client gone" (writing to
 * it failed), "client closed mid-request", "upstream broke the response",
 * or the reason phrase of the error answered before closing ("Bad Request",
 * "Request Header Fields Too Large", "Bad Gateway", or the owner's).
 *
 * Callbacks run from the loop, never from inside a call the owner made.
 * Of the callbacks only on_done may free the connection (the owner may
 * free it any time outside them); on_done is called once, after the
 * driver closed both streams. Loop thread only. */

#include <stdint.h>

#include "http/h1_forward.h"
#include "io/io.h"

struct http_h1_conn;

struct http_h1_conn_cbs {
    /* A request head was read. |req| (in the request's arena) is valid
     * until the exchange ends; the owner may edit req->fields until it
     * calls http_h1_conn_forward. Required. */
    void (*on_request_head)(void *arg, struct http_h1_conn *c, struct http_fwd_req *req);
    /* The final response head, before the client gets it: the hook may
     * edit resp->fields (a new head is written then). NULL: the head goes
     * out as received, without a copy. */
    void (*on_response_head)(void *arg, struct http_h1_conn *c, struct http_fwd_resp *resp);
    /* The driver closed the upstream on its own, the client connection
     * going on ("done": it closed, or sent bytes past a response); the next
     * request needs a new one. NULL: not told. */
    void (*on_upstream_end)(void *arg, struct http_h1_conn *c, const char *reason);
    /* A response is whole and its upstream could carry the next request:
     * with this set, the owner gets it (read stopped, callbacks cleared)
     * instead of the connection keeping it, so that idle client
     * connections hold no upstream (a shared pool, as HAProxy's
     * http-reuse); every request is then forwarded over one given. NULL:
     * the connection keeps it. */
    void (*on_upstream_idle)(void *arg, struct http_h1_conn *c, struct io_stream *up);
    /* The request body the owner asked for with
     * http_h1_conn_collect_request, decoded (chunked framing removed),
     * NUL-terminated, in the request's arena; NULL when it was over the
     * max (|len| is then what was read: it passes on as it came). The
     * owner then decides as after on_request_head. NULL: never asked. */
    void (*on_request_body)(void *arg, struct http_h1_conn *c, struct http_fwd_req *req,
                            const char *body, size_t len);
    /* The same for the response body asked for from inside
     * on_response_head; the owner may edit resp->fields and replace the
     * body (http_h1_conn_set_response_body) before it goes out. */
    void (*on_response_body)(void *arg, struct http_h1_conn *c, struct http_fwd_resp *resp,
                             const char *body, size_t len);
    /* An upgrade request got its 101 (a WebSocket), the head is out: the
     * connection is a tunnel now and both streams are the owner's, with
     * what each side sent past the heads (|to_up|: the client's bytes for
     * the upstream; |to_client|: the upstream's), valid during the call.
     * The owner frees the connection from inside this callback (nothing
     * else of it runs). NULL: a 101 ends the exchange ("upgrade refused":
     * the client connection closes). */
    void (*on_upgrade)(void *arg, struct http_h1_conn *c, struct io_stream *client,
                       struct io_stream *up, struct mem_slice to_up, struct mem_slice to_client);
    /* The connection ended; both streams are closed. Required. */
    void (*on_done)(void *arg, struct http_h1_conn *c, const char *reason);
};

struct http_h1_conn_opts {
    struct http_fwd_opts fwd;
    /* Seconds with nothing moving before the connection ends ("idle"),
     * not counting the time the owner takes to decide; 0: never. */
    double idle_timeout;
};

/* The upstream for a request. */
struct http_h1_upstream {
    struct io_stream *stream;    /* owned by the driver from now on */
    const void *early;           /* bytes the upstream already sent (copied), or NULL */
    size_t early_len;
    uint64_t *up_count;          /* bytes the upstream took, heads included (or NULL) */
    uint64_t *down_count;        /* bytes the client took from it (or NULL) */
};

/* Starts reading requests from |client| (owned from now on: its callbacks
 * are the driver's). |o| and |cbs| are copied. NULL when out of memory
 * (|client| is then still the caller's). */
struct http_h1_conn *http_h1_conn_new(struct io_stream *client, const struct http_h1_conn_opts *o,
                                      const struct http_h1_conn_cbs *cbs, void *arg);

/* Decides the pending request: forward it over |up|, or over the upstream
 * the connection keeps when |up| is NULL (the previous request's, with its
 * counters). A new upstream replaces (closes) a kept one. Returns 0, or -1
 * when no request waits for a decision, it was refused or is a CONNECT,
 * there is no upstream to keep, |up|'s early bytes do not fit a buffer, or
 * out of memory: nothing was taken then (|up->stream| is the caller's) and
 * the request still waits, for an answer such as 502. */
int http_h1_conn_forward(struct http_h1_conn *c, const struct http_h1_upstream *up);

/* Decides the pending request with a local answer (http_fwd_reply's
 * bytes); |reason| is a static string and becomes the done reason when
 * the connection closes after it. Without |close| the request's body is
 * read and dropped and the connection goes on (unless the client asked to
 * close). Returns 0, or -1 when no request waits for a decision. */
int http_h1_conn_respond(struct http_h1_conn *c, int status, const char *reason, const char *extra,
                         int close);

/* The same with the answer's bytes given whole (http_fwd_reply_body's, in
 * the request's arena, or static); empty |bytes| with |close| ends the
 * connection without an answer (a script's reject). */
int http_h1_conn_respond_bytes(struct http_h1_conn *c, struct mem_slice bytes, const char *reason,
                               int close);

/* The request's arena: what hooks allocate lives until the exchange ends. */
struct mem_arena *http_h1_conn_arena(struct http_h1_conn *c);

/* Reads the pending request's body whole (up to |max| bytes as framed)
 * before it is decided: on_request_body follows. Only while a request
 * waits for a decision; -1 otherwise. */
int http_h1_conn_collect_request(struct http_h1_conn *c, size_t max);
/* From on_request_body: the body that goes upstream instead (copied; the
 * framing becomes Content-Length). -1 when it was over its max. */
int http_h1_conn_set_request_body(struct http_h1_conn *c, const char *body, size_t len);
/* From on_response_head: read the response body whole (up to |max|)
 * before the head goes out; on_response_body follows. */
int http_h1_conn_collect_response(struct http_h1_conn *c, size_t max);
/* From on_response_body: the body the client gets instead (copied). */
int http_h1_conn_set_response_body(struct http_h1_conn *c, const char *body, size_t len);

/* Closes the upstream the connection keeps (the owner wants another for
 * the pending request). Only while a request waits for a decision; -1
 * otherwise. on_upstream_end is not called. */
int http_h1_conn_drop_upstream(struct http_h1_conn *c);

/* 1 while the connection keeps an upstream for the next request. */
int http_h1_conn_has_upstream(const struct http_h1_conn *c);

/* Decides the pending request by handing the client stream back (CONNECT:
 * the owner relays it). |*rest| is what the client sent after the head,
 * valid until http_h1_conn_free; the owner frees the connection next (it
 * does nothing more, and closes a kept upstream then). NULL when no
 * request waits for a decision. */
struct io_stream *http_h1_conn_release_client(struct http_h1_conn *c, struct mem_slice *rest);

/* Frees the connection and closes the streams it still holds; callbacks
 * never fire afterwards. May be called from inside on_done. */
void http_h1_conn_free(struct http_h1_conn *c);

/* Bytes the connection holds from malloc: buffers and the request's arena. */
size_t http_h1_conn_memory(const struct http_h1_conn *c);

#endif
