/* libFuzzer target for Trojan UDP (core/outbound/udp_trojan.c): the frames
 * [ATYP ADDR PORT][length BE16][CRLF][payload] a Trojan server sends back
 * in the stream, and the receive loop that buffers them.
 *
 * Input: [pace][cap][flags][stream...].
 *  - The stream (with flags bit 0, followed by one frame of the largest
 *    size, a 255-byte name and 65535 bytes of payload) is cut into frames
 *    with outbound_udp_trojan_frame as far as they go. A frame must lie
 *    inside the bytes, carry the header it says, and read as "more
 *    needed" when cut anywhere before its end; bytes that are malformed
 *    stay malformed however many follow.
 *  - The same stream then arrives through a stream whose reads return
 *    pieces of sizes taken from |pace|, some of them EAGAIN, and
 *    outbound_udp_trojan_recv must give back exactly those frames'
 *    payloads (cut to a buffer of a size from |cap|) and then the error.
 *  - Each payload is sent back with outbound_udp_trojan_send to the
 *    address it came from, through a stream that takes it whole or (flags
 *    bit 1) short by one byte: the frame written must parse to the same
 *    address and payload, and a short write must fail with ECONNRESET. */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "flow/flow.h"
#include "outbound/proxy.h"
#include "io/io.h"
#include "outbound/udp_int.h"
#include "fuzz.h"

/* udp_trojan.c's receive buffer: the largest frame and a little more. A
 * larger one there shows here as an overflow, to be mirrored. */
#define HDR_MAX (1 + 1 + 255 + 2 + 2 + 2)
#define RX_CAP (65536 + HDR_MAX)
#define BIG_FRAME (1 + 1 + 255 + 2 + 2 + 2 + 65535)
#define MAX_FRAMES 1024

struct fake {
    struct io_stream s;
    const uint8_t *in;
    size_t in_len, in_off;
    uint8_t pace;
    uint32_t x; /* xorshift state */
    int again;
    /* writes */
    uint8_t out[BIG_FRAME];
    size_t out_len;
    int short_write;
};

static ssize_t
fake_read(struct io_stream *s, void *buf, size_t len)
{
    struct fake *f = (struct fake *)s;
    CHECK(len > 0);
    /* Piece sizes from |pace| (bit 7: up to a whole frame at once, else
     * up to 4 * pace + 1 bytes), and now and then EAGAIN, never twice in
     * a row. */
    f->x ^= f->x << 13, f->x ^= f->x >> 17, f->x ^= f->x << 5;
    if (f->x % 5 == 0 && !f->again) {
        f->again = 1;
        errno = EAGAIN;
        return -1;
    }
    f->again = 0;
    size_t left = f->in_len - f->in_off;
    if (left == 0)
        return 0; /* the server closed */
    size_t most = f->pace & 0x80 ? 70000 : 1 + (f->pace & 0x7f) * 4u;
    most = most < f->in_len / 32 ? f->in_len / 32 : most; /* the large frame: 32 reads or so */
    size_t n = 1 + f->x % most;
    n = n < len ? n : len;
    n = n < left ? n : left;
    memcpy(buf, f->in + f->in_off, n);
    f->in_off += n;
    return (ssize_t)n;
}

static ssize_t
fake_writev(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    struct fake *f = (struct fake *)s;
    size_t n = 0;
    for (int i = 0; i < iovcnt; i++) {
        CHECK(iov[i].iov_len <= sizeof(f->out) - n);
        memcpy(f->out + n, iov[i].iov_base, iov[i].iov_len);
        n += iov[i].iov_len;
    }
    f->out_len = n;
    return (ssize_t)(f->short_write && n > 0 ? n - 1 : n);
}

static int
fake_shutdown(struct io_stream *s)
{
    abort(); /* the receive and send paths never call it */
}

static void
fake_read_start(struct io_stream *s)
{
}

static void
fake_close(struct io_stream *s, int reset)
{
    abort();
}

static const struct io_stream_ops fake_ops = {
    .name = "fake",
    .read = fake_read,
    .writev = fake_writev,
    .shutdown = fake_shutdown,
    .read_start = fake_read_start,
    .read_stop = fake_read_start,
    .close = fake_close,
};

struct frame {
    size_t off, len;
    struct flow_addr from;
};

static struct fake fk;
static struct outbound_udp u; /* large (its seal buffer): static */
static struct frame frames[MAX_FRAMES];
static uint8_t buf[65536];

/* outbound_udp_trojan_frame on the first |n| bytes of |p|, copied to a
 * block of exactly that size so ASan sees a read past them. */
static int
cut(const uint8_t *p, size_t n)
{
    uint8_t *copy = malloc(n ? n : 1);
    size_t off = 0xdead, len = 0xbeef;

    CHECK(copy != NULL);
    memcpy(copy, p, n);
    int r = outbound_udp_trojan_frame(copy, n, &off, &len);
    free(copy);
    CHECK(r == -1 || r == 0 || r == 1);
    if (r != 1)
        CHECK(off == 0xdead && len == 0xbeef);
    return r;
}

/* The frames at the start of |p| (which ends where its heap block does);
 * how many. |*last| is what the rest reads as (0: more needed, -1:
 * malformed). */
static size_t
reference(const uint8_t *p, size_t n, int *last)
{
    size_t nf = 0, at = 0;
    for (;;) {
        const uint8_t *q = p + at;
        size_t left = n - at, off, len;
        int r = outbound_udp_trojan_frame(q, left, &off, &len);
        CHECK(r == -1 || r == 0 || r == 1);
        if (r != 1) {
            *last = r;
            if (r == 0) /* every shorter cut needs more too */
                for (size_t k = 0; k < left && k < 300; k++)
                    CHECK(cut(q, k) == 0);
            if (r < 0) { /* malformed from some length on, and from then on */
                size_t k = 0;
                while (cut(q, k) == 0)
                    k++;
                CHECK(k <= left && k <= HDR_MAX);
                for (; k <= left && k < HDR_MAX + 2; k++)
                    CHECK(cut(q, k) == -1);
            }
            return nf;
        }
        /* Inside the bytes, after an address that parses, its length and
         * a CRLF. */
        CHECK(nf < MAX_FRAMES); /* 9 bytes at least each, from 4 KiB */
        struct frame *f = &frames[nf++];
        CHECK(off <= left && len <= left - off && off >= 1 + 1 + 1 + 2 + 4 && off <= HDR_MAX);
        CHECK(len == (size_t)(q[off - 4] << 8 | q[off - 3]));
        CHECK(q[off - 2] == '\r' && q[off - 1] == '\n');
        CHECK(outbound_addr_parse(q, off - 4, &f->from) == (int)(off - 4));
        CHECK(f->from.kind != FLOW_ADDR_NAME ||
              (f->from.name_len > 0 && strlen(f->from.name) == f->from.name_len));
        /* Cut before its end, it needs more (every cut of the header for
         * the first frames: a copy each). */
        for (size_t k = 0; k < off; k += nf <= 8 ? 1 : off - 1)
            CHECK(cut(q, k) == 0);
        CHECK(cut(q, off + len - (len > 0)) == (len > 0 ? 0 : 1));
        f->off = at + off;
        f->len = len;
        at += off + len;
    }
}

static void
send_back(const struct frame *f, const uint8_t *payload, int short_write)
{
    u.dst = f->from;
    fk.short_write = short_write;
    fk.out_len = 0;
    errno = 0;
    ssize_t w = outbound_udp_trojan_send(&u, payload, f->len);
    if (short_write) {
        CHECK(w == -1 && errno == ECONNRESET);
        return;
    }
    CHECK(w == (ssize_t)f->len);
    size_t off, len;
    struct flow_addr back;
    CHECK(outbound_udp_trojan_frame(fk.out, fk.out_len, &off, &len) == 1);
    CHECK(off + len == fk.out_len && len == f->len && memcmp(fk.out + off, payload, len) == 0);
    CHECK(outbound_addr_parse(fk.out, off - 4, &back) == (int)(off - 4));
    CHECK(back.kind == f->from.kind && back.port == f->from.port);
    if (back.kind == FLOW_ADDR_NAME)
        CHECK(back.name_len == f->from.name_len && strcmp(back.name, f->from.name) == 0);
    else
        CHECK(memcmp(back.ip, f->from.ip, back.kind == FLOW_ADDR_IP4 ? 4 : 16) == 0);
}

/* The largest frame: a 255-byte name, port 53, 65535 bytes. Made once (a loop per input would cost more than the rest of the input). */
static const uint8_t *
big_frame(void)
{
    static uint8_t f[BIG_FRAME];
    static int done;
    if (!done) {
        uint8_t *p = f;
        *p++ = 3, *p++ = 255;
        memset(p, 'a', 255), p += 255;
        *p++ = 0, *p++ = 53, *p++ = 0xff, *p++ = 0xff, *p++ = '\r', *p++ = '\n';
        for (size_t i = 0; i < 65535; i++)
            *p++ = (uint8_t)(i * 7);
        done = 1;
    }
    return f;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3 || size > 4096)
        return 0;
    uint8_t pace = data[0], flags = data[2];
    size_t cap = data[1] == 0 ? sizeof(buf) : data[1] * 4u;
    size_t n = size - 3;

    size_t total = n + ((flags & 1) ? BIG_FRAME : 0);
    uint8_t *stream = malloc(total ? total : 1); /* exact: the last frame ends at its end */
    CHECK(stream != NULL);
    memcpy(stream, data + 3, n);
    if (flags & 1) {
        memcpy(stream + n, big_frame(), BIG_FRAME);
        n += BIG_FRAME;
    }

    int last;
    size_t nf = reference(stream, n, &last);

    fk = (struct fake){.s = {.ops = &fake_ops}, .in = stream, .in_len = n, .pace = pace,
                       .x = 0x9e3779b9u ^ pace};
    u.ctl = &fk.s;
    if (u.rx == NULL)
        u.rx = malloc(RX_CAP); /* kept: a fresh 64 KiB per input costs page faults */
    u.rx_len = 0;
    CHECK(u.rx != NULL);
    size_t got = 0;
    int eagains = 0;
    for (;;) {
        size_t off = 0x55;
        errno = 0;
        ssize_t r = outbound_udp_trojan_recv(&u, buf, cap, &off);
        if (r < 0 && errno == EAGAIN) {
            CHECK(++eagains < 1000000);
            continue;
        }
        if (r < 0) {
            /* After the last whole frame: malformed bytes, or an end of
             * the stream inside a frame or right after one. */
            CHECK(errno == ECONNRESET && got == nf && last <= 0);
            break;
        }
        CHECK(got < nf);
        const struct frame *f = &frames[got++];
        size_t want = f->len < cap ? f->len : cap;
        CHECK(off == 0 && (size_t)r == want && memcmp(buf, stream + f->off, want) == 0);
        CHECK(u.rx_len <= RX_CAP);
        if (got <= 4)
            send_back(f, stream + f->off, (flags & 2) && got == 1);
    }
    free(stream);
    return 0;
}
