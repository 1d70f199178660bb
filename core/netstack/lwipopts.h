#ifndef CHUTE_LWIPOPTS_H
#define CHUTE_LWIPOPTS_H

/* lwIP 2.1.3 options for chute: raw API, one thread, TCP only, segments
 * injected straight into tcp_input (shared/notes/lwip.md §3 has the measured
 * reasons for each value). */

#define NO_SYS 1
#define LWIP_TIMERS 1
#define SYS_LIGHTWEIGHT_PROT 0
#define LWIP_NETCONN 0
#define LWIP_SOCKET 0

#define LWIP_IPV4 1
#define LWIP_IPV6 1
#define LWIP_TCP 1
#define LWIP_UDP 0
#define LWIP_RAW 0
#define LWIP_ICMP 0
#define LWIP_ICMP6 1 /* nd6 refers to it */
#define LWIP_ARP 0
#define LWIP_ETHERNET 0
#define LWIP_DHCP 0
#define LWIP_IGMP 0
#define LWIP_DNS 0
#define IP_REASSEMBLY 0
#define IP_FRAG 0
#define LWIP_IPV6_FRAG 0
#define LWIP_IPV6_REASS 0
#define LWIP_IPV6_MLD 0
#define LWIP_IPV6_AUTOCONFIG 0
#define LWIP_IPV6_SEND_ROUTER_SOLICIT 0
#define LWIP_IPV6_DHCP6 0
#define LWIP_ND6_ALLOW_RA_UPDATES 0
#define LWIP_IPV6_DUP_DETECT_ATTEMPTS 0
#define LWIP_SINGLE_NETIF 0
#define LWIP_HAVE_LOOPIF 0
#define LWIP_NETIF_LOOPBACK 0
#define LWIP_IPV6_SCOPES 0
#define SO_REUSE 1

/* Packet data comes from malloc under a byte cap (limits.c); pcbs, segments
 * and ROM/REF pbufs from fixed pools beside it (MEMP_MEM_MALLOC=1 would put
 * them in the heap and disable every pool limit). lwIP's own heap is first
 * fit over a list of every block: full with 1,000 uploads (~10,000
 * segments of 1.5 KiB), each allocation walked them all, a failing one to
 * the end, and mem_malloc was 90% of chute's profile. MEM_SIZE stays the
 * cap's ceiling and sizes mem_size_t. */
#define MEM_LIBC_MALLOC 1
#define mem_clib_malloc netstack_heap_malloc
#define mem_clib_free free
#ifndef __ASSEMBLER__
#include <stddef.h>
void *netstack_heap_malloc(size_t n);
#endif
#define MEMP_MEM_MALLOC 0
/* rxbuf.c: a large packet read from the TUN is lwIP's pbuf where it lies. */
#define LWIP_SUPPORT_CUSTOM_PBUF 1
#define MEM_ALIGNMENT 8
#define MEM_SIZE (16 * 1024 * 1024)
#define MEMP_NUM_TCP_PCB 8192
#define MEMP_NUM_TCP_PCB_LISTEN 16384 /* one ANY listener per destination port in use */
#define MEMP_NUM_TCP_SEG 65535
#define MEMP_NUM_PBUF 65535
#define PBUF_POOL_SIZE 64

/* The MSS follows the TUN MTU at run time: lwIP advertises and sends
 * min(TCP_MSS, netif MTU - 40) with TCP_CALCULATE_EFF_SEND_MSS, so TCP_MSS
 * is the largest any MTU allows. The window is a build option
 * (-DCHUTE_LWIP_WND=...): lwIP checks it with #if, so it cannot follow the
 * MTU at run time. 1 MiB is the default: with TUN offload lwIP sends 64 KiB
 * segments whatever the MTU, so its queue holds ~16 segments, not the ~700
 * of 1460 bytes whose walk made 1 MiB slower than 64 KiB at MTU 1500
 * (shared/notes/lwip.md §6.2); scripts/bench/tun measured 1 MiB ahead at
 * every MTU with offload. 64 KiB suits builds for hosts without offload at
 * MTU 1500. */
#define TCP_MSS 65495
#define TCP_CALCULATE_EFF_SEND_MSS 1
#ifndef CHUTE_LWIP_WND
#define CHUTE_LWIP_WND (1024 * 1024)
#endif
#define TCP_WND CHUTE_LWIP_WND
#if CHUTE_LWIP_WND > (0xFFFF << 2)
#define TCP_RCV_SCALE 6
#else
#define TCP_RCV_SCALE 2
#endif
#define LWIP_WND_SCALE 1
#define TCP_SND_BUF TCP_WND
/* Segments per connection, sized for the smallest MSS that fills the buffer
 * (IPv6 minimum MTU: 1220). */
#define TCP_SND_QUEUELEN (4 * (TCP_SND_BUF / 1220) + 8)
#define TCP_SNDLOWAT 1 /* only the socket API reads it */
#define TCP_SNDQUEUELOWAT 8
#define TCP_OVERSIZE TCP_MSS
#define TCP_QUEUE_OOSEQ 1
/* The sanity checks assume one fixed MSS; ours follows the MTU. */
#define LWIP_DISABLE_TCP_SANITY_CHECKS 1
/* A closed connection's TIME_WAIT lasts 2 * TCP_MSL: keep pcbs turning over. */
#define TCP_MSL 10000UL
/* Timestamps, when the client's SYN offers them (Linux's do): the client's
 * TIME_WAIT entries then carry them, which tcp_tw_reuse = 1 needs to let
 * connect() take such a port again. Without them a client closing first at
 * ~10k connections/s to one destination stalled in connect()'s port search
 * (~100 ms every few hundred connections; spec/e2e/tun/17). 12 bytes per
 * segment; the offload path's gso_size leaves room for them (netif.c). */
#define LWIP_TCP_TIMESTAMPS 1
#define TCP_LISTEN_BACKLOG 0

/* The local kernel built every packet read from the TUN. */
#define CHECKSUM_CHECK_IP 0
#define CHECKSUM_CHECK_TCP 0
#define CHECKSUM_CHECK_IP6 0
#define CHECKSUM_GEN_IP 1
#define CHECKSUM_GEN_TCP 1
/* With offload the kernel sums TCP (CHECKSUM_PARTIAL, netif.c), so the
 * netif turns lwIP's TCP sums off; on copy they would be summed anyway
 * (and lwIP's sum-on-copy is a copy, then a sum: no pass saved). */
#define LWIP_CHECKSUM_CTRL_PER_NETIF 1
#define LWIP_CHECKSUM_ON_COPY 0
/* lwIP's own checksum sums 16 bits at a time and took 29% of the CPU of a
 * download; ours sums 64 bits at a time (core/netstack/sys.c). */
#define LWIP_CHKSUM netstack_lwip_chksum
#ifndef __ASSEMBLER__
unsigned short netstack_lwip_chksum(const void *data, int len);
#endif

#define LWIP_STATS 1
#define MEM_STATS 1
#define MEMP_STATS 1
#define TCP_STATS 1
#define LWIP_STATS_DISPLAY 0

#define LWIP_DONT_PROVIDE_BYTEORDER_FUNCTIONS 1

#endif
