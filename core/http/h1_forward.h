#ifndef CHUTE_HTTP_H1_FORWARD_H
#define CHUTE_HTTP_H1_FORWARD_H

/* The rules an HTTP/1 intermediary applies to one exchange, sans-I/O: from
 * a parsed request head, the request that goes upstream (origin-form
 * target, hop-by-hop fields removed, Host added when missing); the
 * framing of both bodies (through http_body_*); whether the connections
 * stay open afterwards; and the head the client gets. Nothing here reads
 * or writes a socket: the HTTP proxy inbound and the MITM drive it
 * (h1_conn.h does, over two io streams).
 *
 * What it does, rule by rule (the HTTP proxy's behaviour, kept):
 *  - the upstream request line is "METHOD origin-form HTTP/1.1";
 *  - Connection, Proxy-Connection, Keep-Alive, Proxy-Authorization, TE and
 *    Upgrade are dropped, and so is every field the Connection header
 *    names (RFC 9110 §7.6.1), except Content-Length, Transfer-Encoding and
 *    Host: the body is forwarded with the framing it came with, so the
 *    head must keep saying what that framing is (dropping them on a
 *    client's say-so would let the body smuggle a request past the hooks);
 *  - except for an upgrade request (Connection lists "upgrade", Upgrade
 *    is there) when the options allow it: Upgrade goes on and "Connection: Upgrade" is added, so a
 *    WebSocket handshake reaches the origin;
 *  - the other fields go on in order, values trimmed; Host is kept as the
 *    client sent it, and added from the target when missing (no port when
 *    it is the scheme's default; brackets around an IPv6 literal);
 *  - no Via is added;
 *  - the client connection closes after the exchange when the request says
 *    "Connection: close" or is HTTP/1.0 without "Connection: keep-alive",
 *    when the response says close, is HTTP/1.0 or runs until close, and
 *    when the response ends before the request body did;
 *  - the response head goes to the client as received unless a hook
 *    edited its fields; a 1xx head is passed on and the final one follows.
 *
 * Strings live in the caller's per-request arena (mem/arena.h): a request
 * and its response are valid until that arena is reset. */

#include <stdint.h>

#include "http/http.h"
#include "mem/arena.h"

/* How request targets look on the connection being served. */
enum http_fwd_form {
    /* A forward proxy's client: absolute-form ("GET http://host/path"),
     * and CONNECT in authority form ("CONNECT host:port"). */
    HTTP_FWD_PROXY,
    /* A server's client (the MITM, a reverse proxy): origin-form targets
     * ("/path", or "*" for OPTIONS), the authority from Host. */
    HTTP_FWD_ORIGIN,
};

struct http_fwd_opts {
    enum http_fwd_form form;
    /* HTTP_FWD_ORIGIN: the authority of an HTTP/1.0 request without Host,
     * and the port a Host without one means (443 for a MITM'd flow). */
    struct mem_slice default_host;
    uint16_t default_port;
    /* Pass upgrade requests on (the driver's owner tunnels a 101); 0: the
     * Upgrade field is dropped as hop-by-hop, as it always was. */
    int upgrade;
};

/* An editable list of header fields in an arena. */
struct http_fwd_fields {
    struct http_header *v;
    size_t n;
    size_t _cap;
    struct mem_arena *_arena;
    int _edited;
};

struct http_fwd_req {
    /* The head as received, every field included (Proxy-Authorization
     * too): views into the arena's copy of the head. */
    struct mem_slice method, target;
    int minor_version;
    const struct http_header *in;
    size_t num_in;

    /* 0, or the status the request must be answered with (400): a target
     * that is not of the form the connection expects, a bad Host, or
     * unusable body framing. The fields below are then unset. */
    int refused;
    int connect;           /* CONNECT (HTTP_FWD_PROXY only): the owner tunnels */
    struct mem_slice host; /* the target's host, without IPv6 brackets */
    uint16_t port;
    struct mem_slice path; /* the upstream request line's target */
    int close;             /* the client ends the connection after this exchange */
    /* "Connection: upgrade" with an Upgrade field (a WebSocket): both go
     * upstream, and a 101 answer turns the connection into a tunnel. */
    int upgrade;
    struct http_body body; /* the request body's framing (none for CONNECT) */
    /* What follows the upstream request line. Edit it through
     * http_fwd_field_*, or the method and path slices directly (with
     * strings that live as long as the arena). */
    struct http_fwd_fields fields;
};

struct http_fwd_resp {
    int status, minor_version;
    struct mem_slice reason;
    int interim;           /* 1xx: passed on; the final response follows */
    int close;             /* says close, is HTTP/1.0, or runs until close */
    struct http_body body; /* the response body's framing */
    /* The fields as received: filled only when asked for (a hook will look
     * at them); editing them makes http_fwd_response_head write a new head. */
    struct http_fwd_fields fields;
    struct mem_slice _raw;
};

/* Takes the request head |parsed| from the |head_len| bytes at |head| (what
 * http_h1_parse_request returned) and copies it into |a|: the request then
 * lives as long as the arena, whatever happens to the caller's buffer.
 * Applies the forwarding rules; a request they refuse still returns 0,
 * with req->refused set (the owner may answer otherwise first, e.g. 407).
 * Returns 0, or -1 when out of memory. */
int http_fwd_request_init(struct http_fwd_req *req, struct mem_arena *a,
                          const struct http_fwd_opts *o, const char *head, size_t head_len,
                          const struct http_request *parsed);

/* The upstream request head, request line to the empty line, in the
 * request's arena. 0, or -1 when out of memory or the request is refused. */
int http_fwd_request_head(const struct http_fwd_req *req, struct mem_slice *out);

/* Takes the response head |parsed| (the |head_len| bytes at |head|) to the
 * request |req|: interim or final, body framing (none for a HEAD request
 * and for 1xx, 204, 304), whether it closes. With |copy| the head and its
 * fields are copied into |a| for a hook to read and edit; without, |head|
 * must stay as it is while the response is forwarded. Returns 0,
 * HTTP_ERR_BAD for framing no one can forward (see
 * http_body_init_response), or -1 when out of memory. */
int http_fwd_response_init(struct http_fwd_resp *resp, struct mem_arena *a,
                           const struct http_fwd_req *req, const char *head, size_t head_len,
                           const struct http_response *parsed, int copy);

/* The head the client gets: the one received, or when the fields were
 * edited a new one ("HTTP/1.x status reason", the fields) in the arena.
 * 0, or -1 when out of memory. */
int http_fwd_response_head(const struct http_fwd_resp *resp, struct mem_slice *out);

/* True once the fields were edited (the head is then written anew). */
int http_fwd_fields_edited(const struct http_fwd_fields *f);

/* A local answer: "HTTP/1.1 |status| |reason|", then unless the status
 * has no body (1xx, 204, 304, 2xx to CONNECT) "Content-Type: text/plain" and the length of
 * the body "|reason|\n" (left out, length kept, for a HEAD request),
 * "Connection: close" with |close|, and |extra| (whole lines with their
 * CRLF, or NULL). |req| may be NULL (no request could be parsed). With
 * |close|, the bytes are exactly those of the HTTP proxy's error answers.
 * 0, or -1 when out of memory. */
int http_fwd_reply(struct mem_arena *a, const struct http_fwd_req *req, int status,
                   const char *reason, const char *extra, int close, struct mem_slice *out);

/* A local answer with a body of the caller's (a script's chute.respond, a
 * Map Local line): "HTTP/1.1 |status| <standard reason>", |extra| (whole
 * header lines with their CRLF, not validated here: the caller built them
 * from checked names and values), Content-Length (unless the status has
 * no body), "Connection: close" with |close|, then |body| (left out for
 * HEAD). 0, or -1 when out of memory. */
int http_fwd_reply_body(struct mem_arena *a, const struct http_fwd_req *req, int status,
                        const char *extra, struct mem_slice body, int close,
                        struct mem_slice *out);

/* What a connection does once a response was delivered whole. */
enum http_fwd_next {
    HTTP_FWD_KEEP,          /* read the client's next request; keep the upstream */
    HTTP_FWD_DROP_UPSTREAM, /* the next request needs another upstream */
    HTTP_FWD_CLOSE,         /* end the client connection */
};

/* |upstream_clean|: the upstream neither sent bytes past the response nor
 * closed. */
enum http_fwd_next http_fwd_after(const struct http_fwd_req *req, const struct http_fwd_resp *resp,
                                  int upstream_clean);

/* Field edits, for hooks. Names must be tokens and values free of control
 * bytes other than HT (else -1: no header injection); both are copied into
 * the arena, values without surrounding SP/HT. Content-Length and
 * Transfer-Encoding cannot be set or removed (-1): the body is forwarded
 * with the framing it arrived with; Host can be set but not removed.
 * set: replaces every field of that name with one (appends when none);
 * add: appends one; del: removes them all, returns how many. -1 also when
 * out of memory. */
int http_fwd_field_set(struct http_fwd_fields *f, struct mem_slice name, struct mem_slice value);
int http_fwd_field_add(struct http_fwd_fields *f, struct mem_slice name, struct mem_slice value);
int http_fwd_field_del(struct http_fwd_fields *f, struct mem_slice name);
/* For a driver that replaces a whole body: the framing fields become
 * "Content-Length: |len|" (Transfer-Encoding goes). 0, or -1 when out of
 * memory. Not for hooks: they edit through the calls above. */
int http_fwd_fields_reframe(struct http_fwd_fields *f, size_t len);
/* The first field called |name| (case-insensitive), or NULL. */
const struct http_header *http_fwd_field_get(const struct http_fwd_fields *f, const char *name);

#endif
