#ifndef CHUTE_HTTP_HTTP_H
#define CHUTE_HTTP_HTTP_H

#include <sys/types.h>

#include "http/http-t.h"

/* Parses an HTTP/1.x request head (request line + headers + CRLF CRLF) from
 * |buf|. Returns the length of the head (> 0) on success, or an enum
 * http_err. Accepts bare LF line ends; refuses obs-fold, control bytes in
 * the request line, NUL anywhere, a version other than HTTP/1.0 or 1.1,
 * header names that are not tokens, and an empty method or target. Fills
 * |req| with views into |buf|; stores nothing on error. Sans-I/O. */
int http_h1_parse_request(const char *buf, size_t len, struct http_request *req);

/* Same for a response head (status line + headers). Status must be 3 digits
 * (100..999). */
int http_h1_parse_response(const char *buf, size_t len, struct http_response *res);

/* Case-insensitive lookup of the first header called |name|; NULL if none. */
const struct http_header *http_header_find(const struct http_header *h, size_t n, const char *name);

/* True if a Connection header lists |token| (case-insensitive, comma-separated). */
int http_connection_has(const struct http_header *h, size_t n, const char *token);
/* The same for a token that is a slice (a header name), of any length. */
int http_connection_lists(const struct http_header *h, size_t n, struct mem_slice token);

/* Sets up |body| for the request |req|: chunked if Transfer-Encoding's last
 * coding is "chunked", else Content-Length, else none. Returns 0, or
 * HTTP_ERR_BAD for: both Transfer-Encoding and Content-Length, differing or
 * malformed Content-Length values, a Transfer-Encoding not ending in chunked. */
int http_body_init_request(struct http_body *body, const struct http_request *req);

/* Sets up |body| for the response |res| to a request whose method was
 * |method|: none for HEAD, 1xx, 204, 304 and a 2xx to CONNECT; chunked;
 * Content-Length; else read until close. Returns 0 or HTTP_ERR_BAD. */
int http_body_init_response(struct http_body *body, const struct http_response *res,
                            struct mem_slice method);

/* Feeds |len| bytes that follow the head (or earlier body bytes). Returns how
 * many of them belong to the body (0..len); sets body->done when the body
 * (with the chunked trailer) has ended, after which the remaining bytes
 * belong to the next message. Returns HTTP_ERR_BAD on malformed chunked
 * framing (bad hex, size overflow, missing CRLF, a line over 4 KiB). */
ssize_t http_body_feed(struct http_body *body, const char *buf, size_t len);

/* Streams a body's data out of its framing: feeds what |buf| holds up to
 * the end of the next run of data, which it names (|*data_off|,
 * |*data_len|, within |buf|; none when the bytes were framing only).
 * Returns the bytes of |buf| used, 0 once the body is done, or
 * HTTP_ERR_BAD. Chunked trailers are dropped. */
ssize_t http_body_next_data(struct http_body *body, const char *buf, size_t len, size_t *data_off,
                            size_t *data_len);

/* Decodes a whole chunked body |raw| (|n| bytes that http_body_feed
 * accepted to its end) into |out| (room for |n| bytes; may be |raw|):
 * the chunks' data, extensions and trailers dropped. Returns the decoded
 * length, or HTTP_ERR_BAD when |raw| is not a whole chunked body. */
ssize_t http_body_dechunk(const char *raw, size_t n, char *out);

/* Splits a request target: absolute-form "http://host[:port]/path?q" or
 * authority-form "host:port" (CONNECT). |host| excludes the brackets of an
 * IPv6 literal; |port| defaults to 80 for http (0 if none given in the
 * authority form, which callers treat as an error); |path| is "/" when the
 * absolute form has none (a static string then). Returns 0, or HTTP_ERR_BAD
 * for another scheme, userinfo, an empty host, a port outside 1..65535.
 * |authority_form| selects the CONNECT form. */
int http_target_split(struct mem_slice target, int authority_form, struct mem_slice *host,
                      uint16_t *port, struct mem_slice *path);

#endif
