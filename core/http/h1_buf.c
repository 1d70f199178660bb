/* The per-direction buffer of an HTTP/1 connection (h1_buf.h). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/h1_buf.h"

int
http_buf_reserve(struct http_buf *b)
{
    if (b->p == NULL) {
        b->p = malloc(HTTP_BUF_START);
        b->cap = b->p ? HTTP_BUF_START : 0;
    } else if (b->len == b->cap && b->cap < HTTP_BUF_MAX) {
        size_t cap = b->cap * 2 > HTTP_BUF_MAX ? HTTP_BUF_MAX : b->cap * 2;
        char *p = realloc(b->p, cap);

        if (p == NULL)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    return b->p == NULL ? -1 : 0;
}

int
http_buf_room(struct http_buf *b, size_t n)
{
    while (http_buf_reserve(b) == 0 && b->cap < n)
        b->len = b->cap; /* http_buf_reserve grows only a full buffer */
    b->len = 0;
    return b->p != NULL && b->cap >= n ? 0 : -1;
}

void
http_buf_consume(struct http_buf *b, size_t n)
{
    if (n == 0)
        return;
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
    b->fwd -= n;
    b->scan = 0;
}

void
http_buf_clear(struct http_buf *b)
{
    b->len = b->fwd = b->scan = 0;
}

void
http_buf_release(struct http_buf *b)
{
    if (b->len > 0)
        return;
    free(b->p);
    *b = (struct http_buf){0};
}

/* A head can only complete on a new line feed: parsing again only then
 * keeps a head sent one byte at a time from costing O(n^2). */
int
http_buf_head_may_end(struct http_buf *b)
{
    int maybe = memchr(b->p + b->scan, '\n', b->len - b->scan) != NULL;

    b->scan = b->len;
    return maybe;
}

ssize_t
http_buf_fill(struct io_stream *s, struct http_buf *b)
{
    ssize_t n;

    if (b->p == NULL) {
        /* Released while idle: the buffer comes back only with bytes, so
         * a connection waiting for its next request holds none. */
        char first[2048];

        n = io_read(s, first, sizeof(first));
        if (n <= 0)
            return n == 0 ? 0 : errno == EAGAIN || errno == EINTR ? -1 : -2;
        if (http_buf_reserve(b) != 0)
            return -2;
        memcpy(b->p, first, (size_t)n);
        b->len = (size_t)n;
        return n;
    }
    if (http_buf_reserve(b) != 0)
        return -2;
    if (b->len == b->cap)
        return -1;
    n = io_read(s, b->p + b->len, b->cap - b->len);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? -1 : -2;
    b->len += (size_t)n;
    return n;
}

/* Writes |*head| (from |*off|) then the forwardable front of |b| in one
 * call. >0 bytes, 0 blocked (on_drain follows), -1 error. */
ssize_t
http_buf_send(struct io_stream *s, struct mem_slice head, size_t *off, struct http_buf *b)
{
    struct iovec iov[2];
    int k = 0;
    ssize_t n;
    size_t h;

    if (*off < head.len)
        iov[k++] = (struct iovec){(void *)(head.ptr + *off), head.len - *off};
    if (b->fwd > 0)
        iov[k++] = (struct iovec){b->p, b->fwd};
    n = io_writev(s, iov, k);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    h = head.len - *off < (size_t)n ? head.len - *off : (size_t)n;
    *off += h;
    if ((size_t)n > h)
        http_buf_consume(b, (size_t)n - h);
    return n;
}
