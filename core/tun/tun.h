#ifndef CHUTE_TUN_TUN_H
#define CHUTE_TUN_TUN_H

/* The TUN device: open or attach (Linux /dev/net/tun, IFF_TUN|IFF_NO_PI),
 * addresses, MTU and routes, batched reads and the write queue.
 *
 * Reads drain up to |batch| packets into preallocated buffers at once; the
 * engine processes the whole batch, then flushes the write queue. Packets
 * towards the TUN are only ever queued (tun_wq_*), so no write happens in
 * the middle of packet processing; the queue flushes once per batch, or
 * early when it is full. A device without offload hands large flushes to
 * a writer thread (writer.c), in order. */

#include <stddef.h>
#include <sys/uio.h>
#include <stdint.h>

#include "log/counter.h"

struct ip_cidr;
struct tun;

#define TUN_BATCH_MAX 256

struct tun_batch {
    size_t n;
    uint8_t *data[TUN_BATCH_MAX]; /* each points at a buffer of the device's MTU */
    uint16_t len[TUN_BATCH_MAX];
};

/* Segmentation offload for one queued packet (IFF_VNET_HDR): a TCP packet
 * whose payload the kernel cuts into |gso_size| segments, checksummed by the
 * kernel from |csum_start| (the TCP header) on. */
struct tun_gso {
    uint8_t version;   /* 4 or 6 */
    uint16_t hdr_len;  /* IP + TCP headers */
    uint16_t gso_size; /* payload bytes per segment (the client's MSS); 0: one segment */
    uint16_t csum_start;
};

/* The device's counters, one X(field, key) each (log/counter.h). */
#define TUN_STATS(X)                                                                               \
    X(pkts_in, pkts_in)       /* packets read */                                                   \
    X(pkts_out, pkts_out)     /* packets written */                                                \
    X(bytes_in, bytes_in)                                                                          \
    X(bytes_out, bytes_out)                                                                        \
    X(gso_in, gso_in)         /* offloaded packets read (several segments each) */                 \
    X(gso_out, gso_out)       /* offloaded packets written */                                      \
    X(batches, batches)       /* reads that returned at least one packet */                        \
    X(wq_flushes, wq_flushes) /* write queue flushes */                                            \
    X(wq_handoffs, wq_handoffs) /* of them, handed to the writer thread (writer.c) */            \
    X(wq_drops, wq_drops)     /* packets the device refused (or too big) */                       \
    X(host_full, host_full)   /* packets the host endpoint's queue had no room for */              \
    X(host_drops, host_drops) /* packets pushed empty or longer than the MTU */

struct tun_stats {
#define X(field, key) uint64_t field;
    TUN_STATS(X)
#undef X
};
/* TUN_STATS as a table over struct tun_stats. */
extern const struct log_counter tun_counters[];

/* What tun_open sets up. Zeroed fields leave the device as it is: no
 * addresses, its own MTU, no routes, no offload. The caller owns it and its
 * arrays; tun_open copies what it needs later (the excluded prefixes, whose
 * rules tun_close removes) and does not refer to them after it returns. */
struct tun_opts {
    char name[16];                 /* the device: created if missing, attached if not */
    const struct ip_cidr *addrs;   /* addresses for the device (its own, with the prefix) */
    size_t num_addrs;
    int mtu;                       /* 0: leave the device's MTU */
    int batch;                     /* packets per read, clamped to 1..TUN_BATCH_MAX */
    int offload;                   /* TCP segmentation offload (IFF_VNET_HDR) */
    int auto_route;                /* policy routes that send everything else through it */
    const struct ip_cidr *exclude; /* with auto_route: prefixes left to the main table */
    size_t num_exclude;
    uint32_t fwmark;               /* with auto_route: packets with this mark (chute's
                                    * upstream sockets) skip the TUN; 0 none */
};

/* Opens the device named in |o| (created if missing, attached if it
 * exists), sets its MTU and addresses when |o| has them, brings it up, and
 * with auto_route installs the policy routes that send everything else
 * through it. Needs CAP_NET_ADMIN. Returns NULL with |err| saying what
 * failed. */
struct tun *tun_open(const struct tun_opts *o, char *err, size_t errlen);
/* Wraps a TUN file descriptor that someone else opened and configured (a
 * host app's, a test's), non-blocking, carrying bare IP packets; chute
 * neither configures nor closes it. */
struct tun *tun_attach_fd(int fd, int mtu, int batch);

/* The host endpoint (host.c): no device; a host app moves the packets.
 * Its packets come in through tun_push, from any thread, into a bounded
 * queue of |queue| MTU-sized slots that tun_read_batch drains on the loop
 * as it would read the device; the write queue is the same, and a flush
 * hands its packets to |out| in batches of up to |batch| instead of
 * write()ing them (|b| and the bytes it points at are valid during the
 * call). The engine wakes its loop itself after a push. */
struct tun_packet {
    const uint8_t *data;
    size_t len;
};
typedef void (*tun_out_fn)(void *arg, const struct tun_batch *b);
struct tun *tun_attach_host(int mtu, int batch, size_t queue, tun_out_fn out, void *arg);
/* Copies as many of |n| packets as the queue has room for, in order, and
 * returns that count (0: full). A packet longer than the MTU or empty is
 * dropped, counted (host_drops) and counts as taken. Any thread. */
size_t tun_push(struct tun *t, const struct tun_packet *pkts, size_t n);
/* Packets pushed and not yet handed out by tun_read_batch. Any thread. */
size_t tun_push_pending(struct tun *t);

/* Removes what tun_open installed (routes, rules) and closes the device. */
void tun_close(struct tun *t);

int tun_fd(const struct tun *t);
int tun_mtu(const struct tun *t);
/* True when the device does segmentation offload: it hands chute TCP
 * packets of up to 64 KiB and takes such packets back (tun_wq_commit_gso). */
int tun_offload(const struct tun *t);
const char *tun_name(const struct tun *t);

/* Reads up to the batch size of packets without blocking. Returns the count
 * (0 when nothing is pending) or -1 on a device error. The buffers stay
 * valid until the next call. */
int tun_read_batch(struct tun *t, struct tun_batch *b);

/* Packet |pkt| of the last batch stays where the device read it: its buffer
 * (|size| bytes from |base|, the last TUN_SLOT_SPARE of them, at |spare|,
 * free for the taker's bookkeeping) is the caller's from now on, to give
 * back (tun_give_back) or free() when done, and the device reads into
 * another. -1, and the packet stays
 * the device's, when |pkt| is no packet of the last batch (or was taken),
 * on the host endpoint, when the buffer is over |budget| bytes or without
 * memory. */
#define TUN_SLOT_SPARE 64
struct tun_slot {
    void *base, *spare;
    size_t size;
};
int tun_take(struct tun *t, const uint8_t *pkt, size_t budget, struct tun_slot *s);
/* A taken buffer back to |t| (NULL: the device is gone), which reads into it
 * again before it asks malloc for another (a download holds a window's worth
 * of them, each taken and freed in turn); freed when |t| has enough, or the
 * size is not its buffers'. */
void tun_give_back(struct tun *t, void *base, size_t size);

/* Reserves |len| bytes for one packet in the write queue (flushing first if
 * it is full) and returns where to build it; NULL if |len| exceeds the MTU
 * (64 KiB with offload). tun_wq_commit queues it. Packets leave in order. */
uint8_t *tun_wq_reserve(struct tun *t, size_t len);
void tun_wq_commit(struct tun *t, size_t len);
/* Queues the reserved packet as a TCP packet the kernel checksums
 * (CHECKSUM_PARTIAL) and, with a gso_size, cuts into segments. Its TCP
 * checksum field must hold the pseudo-header sum (not inverted). Only with
 * tun_offload(). */
void tun_wq_commit_gso(struct tun *t, size_t len, const struct tun_gso *g);
/* Queues a packet of |hdr| (copied) then |n| payload pieces that stay
 * where they are until the flush writes them in one writev, then calls
 * release(arg); |g| as for tun_wq_commit_gso, or NULL. Returns -1 (and
 * keeps nothing) where that cannot be done: the host endpoint (its batches
 * are contiguous packets), a device with a writer thread (only the loop
 * may release), more than TUN_REF_IOV pieces, a header over
 * 128 bytes, a packet over the MTU: the caller copies instead. */
#define TUN_REF_IOV 8
typedef void (*tun_release_fn)(void *arg);
int tun_wq_ref(struct tun *t, const void *hdr, size_t hlen, const struct iovec *payload, int n,
               const struct tun_gso *g, tun_release_fn release, void *arg);
int tun_wq_ref_ok(const struct tun *t);
/* Writes every queued packet to the device. */
void tun_wq_flush(struct tun *t);
/* Shrinks (or grows) the write queue to |bytes|, at least 16 packets of
 * the MTU (a memory_limit: it flushes sooner). Only while it is empty and
 * on a device without a writer thread (the host endpoint): 0, or -1 and
 * the queue stays. */
int tun_wq_limit(struct tun *t, size_t bytes);
size_t tun_wq_pending(const struct tun *t);
/* Flushes that wrote out a non-empty queue so far: a payload tun_wq_ref
 * queued before the count moved past a value is released by then. */
uint64_t tun_wq_flushes(const struct tun *t);

void tun_stats(const struct tun *t, struct tun_stats *out);

#endif
