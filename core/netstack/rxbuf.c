#include <stdint.h>
#include <stdlib.h>

#include "lwip/pbuf.h"
#include "lwip/prot/tcp.h"

#include "ip/ip.h"
#include "netstack/netstack_int.h"
#include "tun/tun.h"

/* A large TCP packet (offload: up to 64 KiB) stays in the buffer the TUN
 * read it into: the buffer becomes lwIP's pbuf (a custom one, given back
 * to the device when lwIP and the relay are done with its bytes) and the
 * device reads into another. The copy into a pbuf of lwIP's heap was 5-7%
 * of an upload's CPU (perf, scripts/bench/tun --perf). Smaller packets are
 * copied: a 64 KiB buffer held for an MTU-sized segment would weigh 40
 * times its bytes on the heap cap. Taken buffers count under that cap
 * whole. */

#define ADOPT_MIN 16384 /* payload bytes: an offloaded packet's, not an MTU's */

struct rx_slot {
    struct pbuf_custom pc; /* first: lwIP's pbuf is the slot */
    void *base;
    size_t size;
};
_Static_assert(sizeof(struct rx_slot) <= TUN_SLOT_SPARE, "TUN_SLOT_SPARE too small");

static size_t in_use;

size_t
netstack_rx_bytes(void)
{
    return in_use;
}

static void
slot_free(struct pbuf *p)
{
    struct rx_slot *r = (struct rx_slot *)p;
    in_use -= r->size;
    tun_give_back(netstack.tun, r->base, r->size); /* NULL after netstack_fini: freed */
}

struct pbuf *
netstack_rx_adopt(const uint8_t *pkt, size_t len, const struct ip_view *v)
{
    if (v->payload_len < ADOPT_MIN || (v->tcp_flags & TCP_SYN) || netstack.tun == NULL)
        return NULL;
    size_t used = netstack_heap_used(), cap = netstack_heap_cap();
    struct tun_slot s;
    if (used >= cap || tun_take(netstack.tun, pkt, cap - used, &s) != 0)
        return NULL;
    struct rx_slot *r = s.spare;
    r->pc.custom_free_function = slot_free;
    r->base = s.base;
    r->size = s.size;
    in_use += s.size;
    netstack_heap_note_peak();
    netstack.st.rx_nocopy += v->payload_len;
    /* PBUF_REF: lwIP may move the payload pointer inside it, never
     * mem_trim it. The packet has data past its options, so lwIP's
     * tcp_parseopt overread (input.c) lands in it. It cannot fail: the
     * payload is the whole length, at offset 0. */
    return pbuf_alloced_custom(PBUF_RAW, (u16_t)len, PBUF_REF, &r->pc, (void *)pkt, (u16_t)len);
}
