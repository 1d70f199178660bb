#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "tun/tun_int.h"

/* The host endpoint: a TUN without a device, for a host app that reads and
 * writes the packets itself (a NetworkExtension's packetFlow, Android's
 * VpnService fd). Its packets take the device's path: tun_read_batch hands
 * out a batch from the queue as it would from read(), the engine processes
 * it the same way, and the write queue flushes to the host's callback.
 *
 * The queue is a ring of MTU-sized slots. Producers (any thread) copy into
 * the free slots under the mutex; the loop takes up to a batch of filled
 * ones and keeps them as its batch until its next read, when they are
 * freed: the buffers a batch points at stay valid as the device's do. The
 * lock is taken once per push and once per batch, never per packet. */

struct tun_host {
    pthread_mutex_t mu;
    uint8_t *buf;    /* |cap| slots, |stride| apart */
    uint16_t *len;
    size_t stride, cap;
    size_t head;     /* the oldest slot not freed (the loop's batch first) */
    size_t held;     /* slots from |head| on in the loop's current batch */
    size_t tail;     /* the next slot to fill; head <= tail <= head + cap */
    uint64_t full, drops;
    tun_out_fn out;
    void *arg;
};

struct tun *
tun_attach_host(int mtu, int batch, size_t queue, tun_out_fn out, void *arg)
{
    if (mtu < 576 || mtu > 65535 || out == NULL)
        return NULL;
    struct tun *t = calloc(1, sizeof(*t));
    struct tun_host *h = calloc(1, sizeof(*h));
    if (t == NULL || h == NULL) {
        free(t);
        free(h);
        return NULL;
    }
    t->fd = -1;
    t->mtu = mtu;
    t->host = h;
    snprintf(t->name, sizeof(t->name), "host");
    if (tun_io_init(t, batch) != 0) {
        tun_close(t);
        return NULL;
    }
    /* The loop's batch is held while it is processed: room for |queue|
     * more packets on top of it. */
    h->cap = (queue < 16 ? 16 : queue) + (size_t)t->batch;
    h->stride = ((size_t)mtu + 63) & ~(size_t)63;
    h->buf = aligned_alloc(64, h->stride * h->cap);
    h->len = calloc(h->cap, sizeof(*h->len));
    h->out = out;
    h->arg = arg;
    if (h->buf == NULL || h->len == NULL || pthread_mutex_init(&h->mu, NULL) != 0) {
        free(h->buf);
        free(h->len);
        h->buf = NULL;
        h->len = NULL;
        t->host = NULL;
        free(h);
        tun_close(t);
        return NULL;
    }
    return t;
}

void
tun_host_free(struct tun *t)
{
    struct tun_host *h = t->host;
    pthread_mutex_destroy(&h->mu);
    free(h->buf);
    free(h->len);
    free(h);
    t->host = NULL;
}

size_t
tun_push(struct tun *t, const struct tun_packet *pkts, size_t n)
{
    struct tun_host *h = t->host;
    size_t taken = 0;
    pthread_mutex_lock(&h->mu);
    while (taken < n) {
        const struct tun_packet *p = &pkts[taken];
        if (p->len == 0 || p->len > (size_t)t->mtu || p->data == NULL) {
            h->drops++;
            taken++;
            continue;
        }
        if (h->tail - h->head == h->cap) {
            h->full += n - taken;
            break;
        }
        size_t i = h->tail % h->cap;
        memcpy(h->buf + i * h->stride, p->data, p->len);
        h->len[i] = (uint16_t)p->len;
        h->tail++;
        taken++;
    }
    pthread_mutex_unlock(&h->mu);
    return taken;
}

size_t
tun_push_pending(struct tun *t)
{
    struct tun_host *h = t->host;
    pthread_mutex_lock(&h->mu);
    size_t n = h->tail - h->head - h->held;
    pthread_mutex_unlock(&h->mu);
    return n;
}

int
tun_host_read(struct tun *t, struct tun_batch *b)
{
    struct tun_host *h = t->host;
    pthread_mutex_lock(&h->mu);
    h->head += h->held; /* the previous batch is done with */
    if (h->head == h->tail)
        h->head = h->tail = 0; /* empty: refill the slots still in cache */
    size_t n = h->tail - h->head;
    h->held = n < (size_t)t->batch ? n : (size_t)t->batch;
    size_t head = h->head;
    pthread_mutex_unlock(&h->mu);
    /* Slots from |head| on are the loop's until its next read: producers
     * fill only slots past |tail|. */
    b->n = h->held;
    for (size_t k = 0; k < b->n; k++) {
        size_t i = (head + k) % h->cap;
        b->data[k] = h->buf + i * h->stride;
        b->len[k] = h->len[i];
        t->st.bytes_in += h->len[i];
    }
    if (b->n > 0) {
        t->st.pkts_in += b->n;
        t->st.batches++;
    }
    return (int)b->n;
}

void
tun_host_flush(struct tun *t)
{
    struct tun_host *h = t->host;
    struct tun_batch b;
    size_t off = 0;
    b.n = 0;
    while (off < t->wq_used) {
        uint32_t l;
        memcpy(&l, t->wq + off, TUN_WQ_HDR);
        b.data[b.n] = t->wq + off + TUN_WQ_HDR;
        b.len[b.n] = (uint16_t)l;
        t->st.bytes_out += l;
        off += TUN_WQ_HDR + l;
        if (++b.n == (size_t)t->batch || off >= t->wq_used) {
            h->out(h->arg, &b);
            t->st.pkts_out += b.n;
            b.n = 0;
        }
    }
}

void
tun_host_stats(const struct tun *t, struct tun_stats *st)
{
    struct tun_host *h = t->host;
    pthread_mutex_lock(&h->mu);
    st->host_full = h->full;
    st->host_drops = h->drops;
    pthread_mutex_unlock(&h->mu);
}
