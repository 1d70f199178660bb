#include <errno.h>
#include <linux/virtio_net.h>
#include <string.h>
#include <sys/uio.h>

#include "log/log.h"
#include "tun/tun_int.h"

/* Write-queue entries whose payload stays where its owner keeps it (lwIP's
 * segments): a bulk download's bytes then go from lwIP's pbufs to the
 * device in the flush's writev instead of being copied into the queue
 * first. The headers are copied (a snapshot: lwIP rewrites a segment's
 * headers when it sends it again), so the entry is [u32 length |
 * TUN_WQ_REF][struct ref][virtio header][headers]. */

#define HDR_MAX 128 /* IPv6 + TCP with every option */

struct ref {
    tun_release_fn release;
    void *arg;
    size_t total; /* header + payload bytes (without the virtio header) */
    int n;
    struct iovec iov[TUN_REF_IOV];
};

int
tun_wq_ref_ok(const struct tun *t)
{
    return t->host == NULL && t->writer == NULL; /* writer.c releases nothing */
}

int
tun_wq_ref(struct tun *t, const void *hdr, size_t hlen, const struct iovec *payload, int n,
           const struct tun_gso *g, tun_release_fn release, void *arg)
{
    size_t total = hlen;
    for (int i = 0; i < n; i++)
        total += payload[i].iov_len;
    if (!tun_wq_ref_ok(t) || n > TUN_REF_IOV || hlen > HDR_MAX || total > t->maxpkt || total == 0)
        return -1;
    size_t vh = t->vnet ? TUN_VNET_HDR : 0;
    size_t need = TUN_WQ_HDR + sizeof(struct ref) + vh + hlen;
    if (t->wq_used + need > t->wq_cap)
        tun_wq_flush(t);
    uint8_t *e = t->wq + t->wq_used;
    struct ref r = {.release = release, .arg = arg, .total = total, .n = n};
    memcpy(r.iov, payload, (size_t)n * sizeof(*payload));
    uint32_t l = (uint32_t)(need - TUN_WQ_HDR) | TUN_WQ_REF;
    memcpy(e, &l, TUN_WQ_HDR);
    memcpy(e + TUN_WQ_HDR, &r, sizeof(r));
    uint8_t *v = e + TUN_WQ_HDR + sizeof(r);
    if (vh > 0) {
        memset(v, 0, vh);
        if (g != NULL)
            tun_vnet_hdr(v, g);
    }
    if (g != NULL && g->gso_size != 0)
        t->st.gso_out++; /* as tun_wq_commit_gso counts them */
    memcpy(v + vh, hdr, hlen);
    t->wq_used += need;
    t->wq_count++;
    return 0;
}

/* Writes the entry at |e| (after its length word |l|) and releases it. */
void
tun_wq_ref_write(struct tun *t, const uint8_t *e, uint32_t l)
{
    struct ref r;
    memcpy(&r, e, sizeof(r));
    size_t vh = t->vnet ? TUN_VNET_HDR : 0;
    size_t hlen = (l & ~TUN_WQ_REF) - sizeof(r);
    struct iovec iov[1 + TUN_REF_IOV];
    iov[0].iov_base = (void *)(e + sizeof(r));
    iov[0].iov_len = hlen;
    memcpy(iov + 1, r.iov, (size_t)r.n * sizeof(*iov));
    ssize_t w = writev(t->fd, iov, 1 + r.n);
    if (w == (ssize_t)(vh + r.total)) {
        t->st.pkts_out++;
        t->st.bytes_out += r.total;
    } else if (t->st.wq_drops++ == 0) {
        LOG_WARN("tun %s: write of %zu bytes: %s (counted as wq_drops from now on)", t->name,
                 vh + r.total, w < 0 ? strerror(errno) : "short write");
    }
    r.release(r.arg);
}

/* Releases the entry at |e| unwritten (the device closes). */
void
tun_wq_ref_drop(const uint8_t *e)
{
    struct ref r;
    memcpy(&r, e, sizeof(r));
    r.release(r.arg);
}
