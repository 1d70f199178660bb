#ifndef CHUTE_HTTP_HTTP_T_H
#define CHUTE_HTTP_HTTP_T_H

#include <stddef.h>
#include <stdint.h>

#include "mem/slice.h"

#define HTTP_MAX_HEADERS 100
#define HTTP_MAX_HEAD 65536 /* a header block larger than this is refused */

enum http_err {
    HTTP_ERR_INCOMPLETE = -1, /* need more bytes */
    HTTP_ERR_BAD = -2,        /* malformed: answer 400 and close */
    HTTP_ERR_TOO_LARGE = -3,  /* head over HTTP_MAX_HEAD or too many headers: 431/400 */
};

struct http_header {
    struct mem_slice name, value; /* value with surrounding whitespace trimmed */
};

/* Views into the caller's buffer: valid while that buffer is unchanged. */
struct http_request {
    struct mem_slice method, target;
    int minor_version; /* HTTP/1.x */
    size_t num_headers;
    struct http_header headers[HTTP_MAX_HEADERS];
};

struct http_response {
    int status;
    int minor_version;
    struct mem_slice reason;
    size_t num_headers;
    struct http_header headers[HTTP_MAX_HEADERS];
};

/* Message body framing (RFC 9112 §6): tracks where a body ends without
 * decoding it, so a proxy can forward bytes as they are. */
enum http_body_kind {
    HTTP_BODY_NONE,    /* no body: ends at once */
    HTTP_BODY_LENGTH,  /* Content-Length */
    HTTP_BODY_CHUNKED, /* Transfer-Encoding: chunked, trailers included */
    HTTP_BODY_CLOSE,   /* response read until the connection closes */
};

struct http_body {
    enum http_body_kind kind;
    uint64_t remaining; /* LENGTH: bytes left; CHUNKED: bytes left in this chunk's data */
    int state;          /* CHUNKED: private parser state */
    int done;
    uint32_t line_len;  /* CHUNKED: private, bounds chunk-size and trailer lines */
};

#endif
