#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/log.h"
#include "tun/tun_int.h"

/* The queue holds a burst of a 1 MiB window at least (~700 packets at MTU
 * 1500) before it must flush early. */
#define WQ_MIN (2u << 20)
#define WQ_HDR 2

int
tun_io_init(struct tun *t, int batch)
{
    t->batch = batch < 1 ? 1 : batch > TUN_BATCH_MAX ? TUN_BATCH_MAX : batch;
    t->bufsize = (size_t)t->mtu;
    t->rbuf = malloc(t->bufsize * (size_t)t->batch);
    t->wq_cap = WQ_MIN > 16 * t->bufsize ? WQ_MIN : 16 * t->bufsize;
    t->wq = malloc(t->wq_cap);
    return t->rbuf && t->wq ? 0 : -1;
}

void
tun_io_fini(struct tun *t)
{
    free(t->rbuf);
    free(t->wq);
}

int
tun_read_batch(struct tun *t, struct tun_batch *b)
{
    b->n = 0;
    while (b->n < (size_t)t->batch) {
        uint8_t *p = t->rbuf + b->n * t->bufsize;
        ssize_t n = read(t->fd, p, t->bufsize);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            return b->n > 0 ? (int)b->n : -1;
        }
        if (n == 0)
            break;
        b->data[b->n] = p;
        b->len[b->n] = (uint16_t)n;
        b->n++;
        t->st.bytes_in += (uint64_t)n;
    }
    if (b->n > 0) {
        t->st.pkts_in += b->n;
        t->st.batches++;
    }
    return (int)b->n;
}

uint8_t *
tun_wq_reserve(struct tun *t, size_t len)
{
    if (len > t->bufsize || len == 0)
        return NULL;
    if (t->wq_used + WQ_HDR + len > t->wq_cap)
        tun_wq_flush(t);
    return t->wq + t->wq_used + WQ_HDR;
}

void
tun_wq_commit(struct tun *t, size_t len)
{
    uint16_t l = (uint16_t)len;
    memcpy(t->wq + t->wq_used, &l, WQ_HDR);
    t->wq_used += WQ_HDR + len;
    t->wq_count++;
}

void
tun_wq_flush(struct tun *t)
{
    size_t off = 0;
    if (t->wq_count == 0)
        return;
    while (off < t->wq_used) {
        uint16_t l;
        memcpy(&l, t->wq + off, WQ_HDR);
        ssize_t n = write(t->fd, t->wq + off + WQ_HDR, l);
        if (n == (ssize_t)l) {
            t->st.pkts_out++;
            t->st.bytes_out += l;
        } else {
            /* The kernel refused it (queue full, device down): TCP will
             * retransmit; counting is all that is left to do. */
            t->st.wq_drops++;
        }
        off += WQ_HDR + l;
    }
    t->wq_used = t->wq_count = 0;
    t->st.wq_flushes++;
}

size_t
tun_wq_pending(const struct tun *t)
{
    return t->wq_count;
}
