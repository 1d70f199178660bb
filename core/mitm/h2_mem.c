#include "mitm/h2_int.h"

/* HTTP/2 body bytes held by every session together. A stream's buffer is
 * bounded by its window, so the sum is bounded by the number of streams
 * times the window: the cap keeps that product under |max| (as lwIP's
 * heap bounds the TUN's). With more streams alive than |max| /
 * H2_STREAM_WINDOW, every session announces a narrower initial stream
 * window (a power of two down to H2_MIN_WINDOW, one SETTINGS frame each):
 * the peers take the difference off every open stream's window (RFC 9113
 * §6.9.2), so a stream with bytes waiting here gets no more until they
 * are down to the new window. Senders slow down by flow control alone:
 * nothing is dropped, no stream is reset or stalls. The window narrows as
 * soon as the streams need it and widens again only with a quarter of
 * room to spare, so a crowd at the edge does not make every session send
 * SETTINGS back and forth. Past the cap, what may still arrive is what the
 * windows let in before the SETTINGS frames left (and, with more streams
 * than |max| / H2_MIN_WINDOW, the narrowest window each); empty buffers
 * are freed meanwhile, so what they take falls with the bytes. */

void
h2_x_mem_init(struct h2x *x, struct mitm_h2_mem *mem)
{
    x->reqb.mem = x->respb.mem = mem;
}

int32_t
h2_mem_window(const struct mitm_h2_mem *mem)
{
    return mem != NULL && mem->window != 0 ? mem->window : H2_STREAM_WINDOW;
}

size_t
h2_mem_h1_limit(const struct mitm_h2_mem *mem)
{
    return (size_t)h2_mem_window(mem);
}

void
h2_mem_add(struct mitm_h2_mem *mem, size_t n)
{
    if (mem == NULL)
        return;
    mem->held += n;
    if (mem->held > mem->peak)
        mem->peak = mem->held;
}

void
h2_mem_sub(struct mitm_h2_mem *mem, size_t n)
{
    if (mem != NULL)
        mem->held -= n;
}

void
h2_mem_streams(struct mitm_h2_mem *mem, int delta)
{
    if (mem == NULL)
        return;
    mem->streams = delta > 0 ? mem->streams + 1 : mem->streams - 1;
    size_t n = mem->streams > 0 ? mem->streams : 1;
    int32_t w = h2_mem_window(mem), want = w;
    while (want > H2_MIN_WINDOW && (size_t)want * n > mem->max)
        want /= 2; /* narrow now */
    while (want < H2_STREAM_WINDOW && (size_t)want * 2 * n <= mem->max / 4 * 3)
        want *= 2; /* widen with room to spare */
    if (want == w)
        return;
    if (want < w)
        mem->narrowed++;
    mem->window = want;
    for (struct h2_io *io = mem->ios; io != NULL; io = io->m_next)
        h2_io_kick(io); /* each announces it at its next flush */
}
