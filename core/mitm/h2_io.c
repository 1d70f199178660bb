#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "log/log.h"
#include "mitm/h2_int.h"

/* One nghttp2 session over one io stream, both roles. Reading feeds
 * mem_recv; writing pulls mem_send only while the stream takes bytes, so
 * nghttp2 asks its data sources for body bytes no faster than the peer
 * reads them (the back-pressure the consume-based windows rely on).
 * Another session's callbacks never write here directly: they kick, and
 * the flush runs before the loop blocks, outside every nghttp2 callback;
 * so does a teardown. */

static void
teardown(struct h2_io *io)
{
    ev_prepare_stop(io->loop, &io->kick);
    io->on_dead(io, io->why != NULL ? io->why : "h2: closed");
}

void
h2_io_fail(struct h2_io *io, const char *why)
{
    if (!io->dead) {
        io->dead = 1;
        io->why = why;
    }
    ev_prepare_start(io->loop, &io->kick);
}

static int
write_some(struct h2_io *io)
{
    while (io->out_len > 0) {
        ssize_t n = io_write(io->io, io->out, io->out_len);
        if (n < 0 && errno == EAGAIN)
            return 1;
        if (n <= 0) {
            h2_io_fail(io, "h2: write failed");
            return -1;
        }
        io->out += n;
        io->out_len -= (size_t)n;
    }
    return 0;
}

/* The streams' window follows the MITM's memory (h2_mem.c): a SETTINGS
 * frame changes every stream's window at once, open ones included (RFC
 * 9113 §6.9.2), so a narrowed window holds back even bytes a stream's
 * window had already let in, once they are read. */
static void
announce_window(struct h2_io *io)
{
    int32_t w = h2_mem_window(io->mem);
    if (io->mem == NULL || w == io->window)
        return;
    nghttp2_settings_entry set = {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (uint32_t)w};
    if (nghttp2_submit_settings(io->ng, NGHTTP2_FLAG_NONE, &set, 1) == 0)
        io->window = w;
}

void
h2_io_flush(struct h2_io *io)
{
    if (io->dead)
        return;
    announce_window(io);
    for (;;) {
        int rc = write_some(io);
        if (rc != 0)
            return; /* on_drain comes back */
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(io->ng, &p);
        if (n < 0) {
            LOG_INFO("h2: send: %s", nghttp2_strerror((int)n));
            h2_io_fail(io, "h2: session error");
            return;
        }
        if (n == 0)
            break;
        io->out = p;
        io->out_len = (size_t)n;
    }
    if (!nghttp2_session_want_read(io->ng) && !nghttp2_session_want_write(io->ng)) {
        h2_io_fail(io, "h2: done");
        return;
    }
}

void
h2_io_kick(struct h2_io *io)
{
    ev_prepare_start(io->loop, &io->kick);
}

static void
on_kick(struct ev_loop *loop, ev_prepare *w, int revents)
{
    struct h2_io *io = w->data;
    ev_prepare_stop(loop, w);
    if (!io->dead)
        h2_io_flush(io);
    if (io->dead)
        teardown(io);
}

static void
on_readable(void *arg)
{
    struct h2_io *io = arg;
    uint8_t buf[16384];
    for (int rounds = 0; rounds < 16 && !io->dead; rounds++) {
        ssize_t n = io_read(io->io, buf, sizeof(buf));
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            h2_io_fail(io, n == 0 ? "h2: peer closed" : "h2: read failed");
            break;
        }
        ssize_t rc = nghttp2_session_mem_recv(io->ng, buf, (size_t)n);
        if (rc < 0) {
            LOG_INFO("h2: %s", nghttp2_strerror((int)rc));
            h2_io_fail(io, "h2: protocol error");
            break;
        }
        if (rounds == 15)
            ev_prepare_start(io->loop, &io->kick); /* let others run; reading goes on */
    }
    h2_io_flush(io);
    if (io->dead)
        teardown(io);
}

static void
on_drain(void *arg)
{
    struct h2_io *io = arg;
    h2_io_flush(io);
    if (io->dead)
        teardown(io);
}

void
h2_io_init(struct h2_io *io, struct ev_loop *loop, struct io_stream *s,
           void (*on_dead)(struct h2_io *, const char *))
{
    io->io = s;
    io->loop = loop;
    io->on_dead = on_dead;
    ev_prepare_init(&io->kick, on_kick);
    io->kick.data = io;
    io_set_callbacks(s, on_readable, on_drain, io);
    io_read_start(s);
    io->reading = 1;
}

void
h2_io_track(struct h2_io *io, struct mitm_h2_mem *mem)
{
    io->mem = mem;
    io->window = H2_STREAM_WINDOW;
    io->m_prev = NULL;
    io->m_next = mem->ios;
    if (mem->ios != NULL)
        mem->ios->m_prev = io;
    mem->ios = io;
}

void
h2_io_fini(struct h2_io *io, int reset)
{
    if (io->mem != NULL) {
        if (io->m_prev != NULL)
            io->m_prev->m_next = io->m_next;
        else
            io->mem->ios = io->m_next;
        if (io->m_next != NULL)
            io->m_next->m_prev = io->m_prev;
        io->mem = NULL;
    }
    if (io->loop != NULL)
        ev_prepare_stop(io->loop, &io->kick);
    if (io->io != NULL) {
        io_set_callbacks(io->io, NULL, NULL, NULL);
        io_close(io->io, reset);
        io->io = NULL;
    }
    if (io->ng != NULL) {
        nghttp2_session_del(io->ng);
        io->ng = NULL;
    }
}

nghttp2_option *
h2_io_options(int server)
{
    nghttp2_option *o;
    if (nghttp2_option_new(&o) != 0)
        return NULL;
    nghttp2_option_set_no_auto_window_update(o, 1); /* windows open as the other side reads */
    nghttp2_option_set_max_send_header_block_length(o, H2_MAX_HEADER_LIST * 2);
    nghttp2_option_set_max_deflate_dynamic_table_size(o, 4096);
    nghttp2_option_set_max_outbound_ack(o, 1000);   /* PING/SETTINGS floods */
    nghttp2_option_set_max_settings(o, 32);
    if (!server)
        nghttp2_option_set_peer_max_concurrent_streams(o, 100); /* until its SETTINGS come */
    return o;
}

/* ---- body buffers -------------------------------------------------------- */

int
h2_buf_put(struct h2_buf *b, const uint8_t *p, size_t n, size_t cap)
{
    if (n == 0)
        return 0;
    if (b->off > 0 && b->off == b->len)
        b->off = b->len = 0;
    if (b->len - b->off + n > cap)
        return -1;
    if (b->len + n > b->cap) {
        if (b->off > 0) {
            memmove(b->p, b->p + b->off, b->len - b->off);
            b->len -= b->off;
            b->off = 0;
        }
        if (b->len + n > b->cap) {
            size_t nc = b->cap ? b->cap : 16384;
            while (nc < b->len + n)
                nc *= 2;
            char *q = realloc(b->p, nc);
            if (q == NULL)
                return -1;
            if (b->mem != NULL)
                b->mem->alloc += nc - b->cap;
            b->p = q;
            b->cap = nc;
        }
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    h2_mem_add(b->mem, n);
    return 0;
}

size_t
h2_buf_take(struct h2_buf *b, uint8_t *dst, size_t max)
{
    size_t n = b->len - b->off < max ? b->len - b->off : max;
    if (n == 0)
        return 0; /* an empty buffer may have no memory yet */
    memcpy(dst, b->p + b->off, n);
    b->off += n;
    h2_mem_sub(b->mem, n);
    if (b->off == b->len) {
        b->off = b->len = 0;
        if (b->mem != NULL && b->mem->held > b->mem->max / 2)
            h2_buf_free(b); /* under pressure an empty buffer gives its memory back */
    }
    return n;
}

void
h2_buf_free(struct h2_buf *b)
{
    struct mitm_h2_mem *mem = b->mem;
    size_t cap = b->cap, left = b->len - b->off;
    free(b->p);
    *b = (struct h2_buf){.mem = mem};
    if (mem != NULL && cap > 0) {
        h2_mem_sub(mem, left);
        mem->alloc -= cap;
    }
}
