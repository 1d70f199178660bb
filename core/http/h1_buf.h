#ifndef CHUTE_HTTP_H1_BUF_H
#define CHUTE_HTTP_H1_BUF_H

/* Private to core/http: the byte buffer each direction of an HTTP/1
 * connection reads into (h1_conn.c). It holds at most HTTP_BUF_MAX bytes:
 * a head up to HTTP_MAX_HEAD and some of what follows it. Reading stops
 * while it holds bytes not yet sent on, which is the back-pressure. */

#include <stddef.h>
#include <sys/types.h>

#include "http/http-t.h"
#include "io/io.h"

#define HTTP_BUF_START 16384
#define HTTP_BUF_MAX (HTTP_MAX_HEAD + 16384)

struct http_buf {
    char *p;
    size_t len, cap;
    size_t fwd;  /* bytes at the front that are ready to send on */
    size_t scan; /* bytes known not to hold a complete head */
};

/* Allocates on first use; grows a full buffer, up to HTTP_BUF_MAX. 0 or -1. */
int http_buf_reserve(struct http_buf *b);
/* Room for |n| (<= HTTP_BUF_MAX) bytes in an empty buffer. 0 or -1. */
int http_buf_room(struct http_buf *b, size_t n);
/* Drops the first |n| bytes, all of them forwardable. */
void http_buf_consume(struct http_buf *b, size_t n);
void http_buf_clear(struct http_buf *b);
/* Frees an empty buffer (a held one stays); the next fill allocates again
 * once bytes come. */
void http_buf_release(struct http_buf *b);
/* False while no line feed arrived since the last call: a head cannot
 * have ended, and need not be parsed again. */
int http_buf_head_may_end(struct http_buf *b);
/* Reads what |s| has. >0 bytes, 0 EOF, -1 would block (or full), -2 error
 * (out of memory included). */
ssize_t http_buf_fill(struct io_stream *s, struct http_buf *b);
/* Writes |head| from |*off|, then the forwardable front of |b|, in one
 * writev. >0 bytes, 0 blocked (the stream's on_drain follows), -1 error. */
ssize_t http_buf_send(struct io_stream *s, struct mem_slice head, size_t *off, struct http_buf *b);

#endif
