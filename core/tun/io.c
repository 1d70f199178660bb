#include <errno.h>
#include <linux/virtio_net.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/log.h"
#include "tun/tun_int.h"

/* The queue holds a burst of a 1 MiB window at least (~700 packets at MTU
 * 1500) before it must flush early. */
#define WQ_MIN (2u << 20)
#define WQ_HDR TUN_WQ_HDR /* u32: a 64 KiB packet plus its virtio header */
#define RD_SKEW 6

/* With IFF_VNET_HDR each queued packet is [u32 length][virtio_net_hdr]
 * [packet], so one write() sends header and packet from one place. */
static size_t
vhdr(const struct tun *t)
{
    return t->vnet ? TUN_VNET_HDR : 0;
}

/* A read buffer: the packet's stride, then the taker's spare bytes. */
static size_t
slot_size(const struct tun *t)
{
    return t->stride + TUN_SLOT_SPARE;
}

int
tun_io_init(struct tun *t, int batch)
{
    t->batch = batch < 1 ? 1 : batch > TUN_BATCH_MAX ? TUN_BATCH_MAX : batch;
    t->maxpkt = t->vnet ? 65535 : (size_t)t->mtu;
    t->bufsize = t->maxpkt + vhdr(t);
    /* Each read slot starts 6 bytes into a 64-byte aligned buffer, so the IP
     * header after a 10-byte virtio header lands on a 16-byte boundary; the
     * buffer ends with TUN_SLOT_SPARE bytes for whoever takes it. */
    t->rd_off = t->vnet ? RD_SKEW : 0;
    t->stride = (t->bufsize + t->rd_off + 63) & ~(size_t)63;
    t->wq_cap = WQ_MIN > 16 * t->bufsize ? WQ_MIN : 16 * t->bufsize;
    t->wq = malloc(t->wq_cap);
    if (t->wq == NULL)
        return -1;
    if (t->host) /* its batches point into its queue (host.c) */
        return 0;
    if ((t->slot = calloc((size_t)t->batch, sizeof(*t->slot))) == NULL)
        return -1;
    for (int i = 0; i < t->batch; i++)
        if ((t->slot[i] = aligned_alloc(64, slot_size(t))) == NULL)
            return -1;
    return 0;
}

int
tun_wq_limit(struct tun *t, size_t bytes)
{
    size_t min = 16 * (WQ_HDR + t->bufsize);
    if (bytes < min)
        bytes = min;
    /* A writer's two buffers take turns as the queue; only the host
     * endpoint, which has none, is resized. */
    if (t->wq_used != 0 || t->writer != NULL)
        return -1;
    uint8_t *q = realloc(t->wq, bytes);
    if (q == NULL)
        return -1;
    t->wq = q;
    t->wq_cap = bytes;
    return 0;
}

void
tun_io_fini(struct tun *t)
{
    /* Entries that reference their owner's memory go back to it. */
    for (size_t off = 0; t->wq != NULL && off < t->wq_used;) {
        uint32_t l;
        memcpy(&l, t->wq + off, WQ_HDR);
        if (l & TUN_WQ_REF)
            tun_wq_ref_drop(t->wq + off + WQ_HDR);
        off += WQ_HDR + (l & ~TUN_WQ_REF);
    }
    for (int i = 0; t->slot != NULL && i < t->batch; i++)
        free(t->slot[i]);
    free(t->slot);
    free(t->wq);
    while (t->spare != NULL) {
        void *next = *(void **)t->spare;
        free(t->spare);
        t->spare = next;
    }
    t->nspare = 0;
    t->slot = NULL;
    t->wq = NULL;
    t->nread = 0;
}

int
tun_read_batch(struct tun *t, struct tun_batch *b)
{
    if (t->host != NULL)
        return tun_host_read(t, b);
    b->n = t->nread = 0;
    while (b->n < (size_t)t->batch) {
        uint8_t *p = t->slot[b->n] + t->rd_off;
        ssize_t n = read(t->fd, p, t->bufsize);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            return b->n > 0 ? (int)b->n : -1;
        }
        if ((size_t)n <= vhdr(t))
            break;
        /* An offloaded packet arrives whole (up to 64 KiB, one TCP segment
         * to lwIP); its partial checksum does not matter: input checksums
         * are not verified (the local kernel made the packet). */
        if (t->vnet && p[offsetof(struct virtio_net_hdr, gso_type)] != VIRTIO_NET_HDR_GSO_NONE)
            t->st.gso_in++;
        b->data[b->n] = p + vhdr(t);
        b->len[b->n] = (uint16_t)((size_t)n - vhdr(t));
        b->n++;
        t->st.bytes_in += (uint64_t)n - vhdr(t);
    }
    if (b->n > 0) {
        t->st.pkts_in += b->n;
        t->st.batches++;
    }
    t->nread = b->n;
    return (int)b->n;
}

int
tun_take(struct tun *t, const uint8_t *pkt, size_t budget, struct tun_slot *s)
{
    size_t size = slot_size(t);
    if (t->slot == NULL || size > budget)
        return -1;
    size_t off = t->rd_off + vhdr(t);
    for (size_t i = 0; i < t->nread; i++) {
        if (pkt != t->slot[i] + off)
            continue;
        uint8_t *fresh = t->spare;
        if (fresh != NULL) {
            t->spare = *(void **)fresh;
            t->nspare--;
        } else if ((fresh = aligned_alloc(64, size)) == NULL) {
            return -1;
        }
        s->base = t->slot[i];
        s->spare = t->slot[i] + t->stride;
        s->size = size;
        t->slot[i] = fresh;
        return 0;
    }
    return -1;
}

void
tun_give_back(struct tun *t, void *base, size_t size)
{
    if (t == NULL || t->slot == NULL || size != slot_size(t) ||
        t->nspare >= (size_t)t->batch) {
        free(base);
        return;
    }
    *(void **)base = t->spare;
    t->spare = base;
    t->nspare++;
}

uint8_t *
tun_wq_reserve(struct tun *t, size_t len)
{
    if (len > t->maxpkt || len == 0)
        return NULL;
    if (t->wq_used + WQ_HDR + vhdr(t) + len > t->wq_cap)
        tun_wq_flush(t);
    return t->wq + t->wq_used + WQ_HDR + vhdr(t);
}

void
tun_wq_commit(struct tun *t, size_t len)
{
    uint32_t l = (uint32_t)(len + vhdr(t));
    memcpy(t->wq + t->wq_used, &l, WQ_HDR);
    if (t->vnet)
        memset(t->wq + t->wq_used + WQ_HDR, 0, TUN_VNET_HDR);
    t->wq_used += WQ_HDR + l;
    t->wq_count++;
}

void
tun_vnet_hdr(uint8_t *v, const struct tun_gso *g)
{
    struct virtio_net_hdr h = {
        .flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
        .gso_type = g->gso_size == 0   ? VIRTIO_NET_HDR_GSO_NONE
                    : g->version == 4 ? VIRTIO_NET_HDR_GSO_TCPV4
                                      : VIRTIO_NET_HDR_GSO_TCPV6,
        .hdr_len = g->hdr_len,
        .gso_size = g->gso_size,
        .csum_start = g->csum_start,
        .csum_offset = 16, /* the TCP checksum field */
    };
    memcpy(v, &h, TUN_VNET_HDR);
}

void
tun_wq_commit_gso(struct tun *t, size_t len, const struct tun_gso *g)
{
    tun_wq_commit(t, len);
    tun_vnet_hdr(t->wq + t->wq_used - len - TUN_VNET_HDR, g);
    if (g->gso_size != 0)
        t->st.gso_out++;
}

void
tun_wq_flush(struct tun *t)
{
    size_t off = 0;
    if (t->wq_count == 0)
        return;
    if (t->host != NULL) {
        tun_host_flush(t);
        off = t->wq_used;
    } else if (t->writer != NULL && tun_writer_take(t)) {
        off = t->wq_used; /* the writer has them (and t->wq is its spare) */
    }
    while (off < t->wq_used) {
        uint32_t l;
        memcpy(&l, t->wq + off, WQ_HDR);
        if (l & TUN_WQ_REF) {
            tun_wq_ref_write(t, t->wq + off + WQ_HDR, l);
            off += WQ_HDR + (l & ~TUN_WQ_REF);
            continue;
        }
        ssize_t n = write(t->fd, t->wq + off + WQ_HDR, l);
        if (n == (ssize_t)l) {
            t->st.pkts_out++;
            t->st.bytes_out += l - vhdr(t);
        } else {
            /* The kernel refused it (queue full, device down): TCP will
             * retransmit; counting is all that is left to do. */
            if (t->st.wq_drops++ == 0)
                LOG_WARN("tun %s: write of %u bytes: %s (counted as wq_drops from now on)",
                         t->name, l, n < 0 ? strerror(errno) : "short write");
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

uint64_t
tun_wq_flushes(const struct tun *t)
{
    return t->st.wq_flushes;
}
