#include <stdint.h>
#include <stdlib.h>

#include "lwip/priv/tcp_priv.h"

#include "netstack/netstack_int.h"
#include "tun/tun.h"

/* Chunks a relay reads a download into, which lwIP's segments reference
 * (tcp_write without TCP_WRITE_FLAG_COPY) until the client acknowledges
 * them: the bytes go from the upstream socket to the TUN with no copy in
 * between (the copy into lwIP's pbufs was 8% of a download's CPU).
 *
 * lwIP says nothing when it drops a reference, so a chunk is let go by
 * count: the connection's bytes queued after the chunk's last one (|end|)
 * against the bytes lwIP reported acknowledged (its sent callback counts
 * whole freed segments, so a segment that spans two chunks holds both).
 * Past that no segment points into the chunk, but a packet already in the
 * TUN write queue may still (a retransmission queued before the ACK came
 * in the same batch): the chunk is freed once the queue has been written
 * out since. Chunks count under lwIP's heap cap like the pbufs they
 * replace (netstack_heap_used). */

#define CHUNK_SIZE (64 * 1024)
#define SPACE_MIN (8 * 1024) /* a tail with less is full: the next one begins */

struct netstack_tx_chunk {
    struct netstack_tx_chunk *next;
    uint64_t end; /* queued count after the last byte; once released: the flush awaited */
    uint32_t cap, used;
    uint8_t data[];
};

static struct netstack_tx_chunk *released, **released_tail = &released;
static size_t in_use; /* bytes of chunks taken: under the heap cap */

static void
chunk_free(struct netstack_tx_chunk *k)
{
    in_use -= CHUNK_SIZE;
    free(k);
}

static struct netstack_tx_chunk *
chunk_new(void)
{
    struct netstack_tx_chunk *k = malloc(CHUNK_SIZE);
    if (k == NULL)
        return NULL;
    in_use += CHUNK_SIZE;
    netstack_heap_note_peak();
    return k;
}

size_t
netstack_tx_bytes(void)
{
    return in_use;
}

static void
chunk_release(struct netstack_tx_chunk *k)
{
    struct tun *t = netstack.tun;
    if (t == NULL || tun_wq_pending(t) == 0) {
        chunk_free(k);
        return;
    }
    k->end = tun_wq_flushes(t);
    k->next = NULL;
    *released_tail = k;
    released_tail = &k->next;
}

void
netstack_tx_reap(void)
{
    struct tun *t = netstack.tun;
    /* No queue, or an empty one: nothing points into them any more. */
    int none = t == NULL || tun_wq_pending(t) == 0;
    uint64_t flushes = t != NULL ? tun_wq_flushes(t) : 0;
    while (released != NULL && (none || flushes > released->end)) {
        struct netstack_tx_chunk *k = released;
        released = k->next;
        chunk_free(k);
    }
    if (released == NULL)
        released_tail = &released;
}

uint8_t *
netstack_tx_space(struct netstack_tx *tx, size_t *len, size_t budget)
{
    struct netstack_tx_chunk *k = tx->tail;
    if (k == NULL || k->cap - k->used < SPACE_MIN) {
        /* A new chunk only for a read worth it, and only where the heap has
         * it below the cap: otherwise the caller copies, as before. */
        if (budget < SPACE_MIN || netstack_heap_used() + CHUNK_SIZE > NETSTACK_MEM_HIGH ||
            (k = chunk_new()) == NULL)
            return NULL;
        k->next = NULL;
        k->end = tx->queued;
        k->cap = CHUNK_SIZE - (uint32_t)sizeof(*k);
        k->used = 0;
        if (tx->tail != NULL)
            tx->tail->next = k;
        else
            tx->head = k;
        tx->tail = k;
    }
    size_t space = k->cap - k->used;
    if (*len > space)
        *len = space;
    return k->data + k->used;
}

void
netstack_tx_queued(struct netstack_tx *tx, size_t n, int in_tail)
{
    tx->queued += n;
    if (in_tail) {
        netstack.st.tx_nocopy += n;
        tx->tail->used += (uint32_t)n;
        tx->tail->end = tx->queued;
    }
}

void
netstack_tx_acked(struct netstack_tx *tx, size_t n)
{
    tx->acked += n;
    if (tx->acked > tx->queued)
        tx->acked = tx->queued; /* cannot be; a count never runs ahead of the bytes */
    while (tx->head != NULL && tx->head->end <= tx->acked) {
        struct netstack_tx_chunk *k = tx->head;
        /* The tail too once all of it is acknowledged: an idle connection
         * keeps no chunk. */
        tx->head = k->next;
        if (tx->head == NULL)
            tx->tail = NULL;
        chunk_release(k);
    }
}

void
netstack_tx_unused(struct netstack_tx *tx)
{
    struct netstack_tx_chunk *k = tx->tail, **at = &tx->head;
    if (k == NULL || k->used != 0)
        return;
    while (*at != k)
        at = &(*at)->next;
    *at = NULL;
    if (tx->head == NULL) {
        tx->tail = NULL;
    } else {
        struct netstack_tx_chunk *p = tx->head;
        while (p->next != NULL)
            p = p->next;
        tx->tail = p;
    }
    chunk_free(k); /* nothing of it was ever given to lwIP */
}

static uint64_t
seg_bytes(const struct tcp_seg *g)
{
    uint64_t n = 0;
    for (; g != NULL; g = g->next)
        n += g->len;
    return n;
}

struct netstack_tx *
netstack_tx_new(const struct tcp_pcb *pcb)
{
    struct netstack_tx *tx = calloc(1, sizeof(*tx));
    if (tx != NULL)
        tx->queued = seg_bytes(pcb->unacked) + seg_bytes(pcb->unsent);
    return tx;
}

void
netstack_tx_free(struct netstack_tx *tx)
{
    if (tx == NULL)
        return;
    while (tx->head != NULL) {
        struct netstack_tx_chunk *k = tx->head;
        tx->head = k->next;
        chunk_release(k);
    }
    free(tx);
}
