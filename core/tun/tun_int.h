#ifndef CHUTE_TUN_INT_H
#define CHUTE_TUN_INT_H

/* Private to core/tun. */

#include "ip/ip.h"
#include "tun/tun.h"

struct tun {
    int fd;
    int ifindex;
    int mtu;
    int batch;
    char name[16];
    int routed;
    int borrowed;   /* the fd belongs to the caller of tun_attach_fd */
    int vnet;       /* IFF_VNET_HDR: every packet has a virtio_net_hdr in front */
    size_t maxpkt;  /* the largest packet read or written: MTU, or 64 KiB with offload */
    uint32_t fwmark;
    struct ip_cidr *exclude;
    size_t num_exclude;
    /* Read side: |batch| buffers of |stride| bytes (the packet at |rd_off|,
     * up to |bufsize| with its virtio header), each its own allocation so
     * tun_take can give one away; |nread| of them hold the last batch. */
    uint8_t **slot;
    size_t bufsize, stride, rd_off, nread;
    /* Buffers given back (tun_give_back), reused before malloc is asked:
     * a list through their first bytes, at most |batch| of them. */
    void *spare;
    size_t nspare;
    /* Write queue: packets packed back to back as [u32 length][bytes]. */
    uint8_t *wq;
    size_t wq_cap, wq_used, wq_count;
    struct tun_stats st;
    struct tun_host *host; /* the host endpoint's queue (host.c); NULL for a device */
    struct tun_writer *writer; /* writer.c: a device without offload; NULL: writes inline */
};

#define TUN_VNET_HDR 10 /* sizeof(struct virtio_net_hdr) */
#define TUN_WQ_HDR 4    /* each queued packet's u32 length */
#define TUN_WQ_REF 0x80000000u /* in that length: a tun_wq_ref entry (wq_ref.c) */

/* io.c: the virtio header for |g| at |v| (TUN_VNET_HDR bytes). */
void tun_vnet_hdr(uint8_t *v, const struct tun_gso *g);
/* wq_ref.c: writes (and releases) or only releases a ref entry. */
void tun_wq_ref_write(struct tun *t, const uint8_t *e, uint32_t l);
void tun_wq_ref_drop(const uint8_t *e);

int tun_io_init(struct tun *t, int batch);
/* host.c: the host endpoint's halves of tun_read_batch and tun_wq_flush,
 * and its share of tun_stats and tun_close. */
int tun_host_read(struct tun *t, struct tun_batch *b);
void tun_host_flush(struct tun *t);
void tun_host_stats(const struct tun *t, struct tun_stats *st);
void tun_host_free(struct tun *t);
void tun_io_fini(struct tun *t);
/* writer.c: the writer thread of a device without offload (tun_open only:
 * a borrowed fd's owner may read it right after a flush). _take, from a
 * flush: waits for the previous buffer to be written, then hands the queue
 * over (1; t->wq is then the empty spare) or leaves it to be written
 * inline (0). */
int tun_writer_start(struct tun *t);
int tun_writer_take(struct tun *t);
void tun_writer_stats(const struct tun *t, struct tun_stats *st);
void tun_writer_stop(struct tun *t);

#endif
