/* libFuzzer target for the TUN data path: the packet parser, the dispatch
 * of core/engine/datapath.c, the TCP flow table and lwIP injection
 * (core/netstack), the UDP NAT (core/flow/udp.c) and the local ICMP echo,
 * driven through one engine with a real bundle.
 *
 * datapath.c is compiled into this file (STYLE §19: a test includes the .c
 * when statics matter), so the batch handler on_tun() and packet() run as
 * they do in chute; the linker then never pulls datapath.o out of
 * chute_core, since this file defines all of its symbols. tun_open() is
 * renamed on the way in: the "device" is one end of a SOCK_DGRAM
 * socketpair wrapped by tun_attach_fd(), and the harness holds the other
 * end, writing the packets in and reading what chute writes out.
 *
 * The engine and its script live for the whole run; the TUN path (lwIP's
 * netif and listeners, every connection, the UDP table) is started and
 * stopped around each input, so inputs do not leak state into each other.
 *
 * Input: records of a 2-byte big-endian header and a packet.
 *   bits 0..13  packet length (0: no packet); the record is cut short at the
 *               end of the input. Bytes past the MTU (64 KiB with offload)
 *               are truncated by the read, as a TUN does.
 *   bit 15      end of batch after this record: the engine reads the batch
 *               (at most tun.batch packets: a full batch ends by itself),
 *               then the loop turns a few times so connects complete and
 *               upstream bytes come back.
 *   bit 14      then lwIP's clock advances 500 ms (two tcp_tmr() ticks):
 *               retransmissions, SYN_RCVD and TIME_WAIT expiry.
 * An input that starts with the header 0xC000 (which would mean: no
 * packet, end the batch, advance the clock, before anything exists) runs
 * with segmentation offload, as tun = { offload = true } does: the tun is
 * switched to IFF_VNET_HDR the way tun_open() switches it, every record
 * then holds what such a device delivers, a 10-byte virtio_net_hdr and the
 * packet (records of 10 bytes or fewer are skipped: a device never reads
 * that little), packets up to 64 KiB go in, and lwIP may answer with
 * segmentation-offload packets.
 * Before a TCP segment with ACK goes in, its acknowledgment number is
 * shifted by the ISS of the SYN-ACK chute sent for that 4-tuple in this
 * input, if any: seeds write ack = 1 for "SYN-ACK + 1", and lwIP's ISS,
 * which moves from run to run, does not hide the rest of the connection.
 *
 * No traffic leaves loopback. chute drops TCP and UDP to loopback before
 * routing, so the flows go to documentation addresses instead: 192.0.2.1
 * (TEST-NET-1, RFC 5737) and 2001:db8::1 (RFC 3849). The bundle's route()
 * rejects every other destination and every odd port, with fallback
 * REJECT; and this file defines connect(), which every upstream socket of
 * chute calls (TCP, and the UDP NAT's connected sockets, which then only
 * send()), to abort on any other address (a finding: route() said REJECT,
 * or chute routed a destination it must have dropped) and to send the
 * DIRECT ones, whatever their port, to sockets of this harness on
 * loopback, never to another program's and never to the address itself:
 *   TCP port % 4 == 0  an echo server ('Q' first in a read: echo then
 *                      close; 'R': reset)
 *   TCP port % 4 == 2  a bound socket that does not listen: refused
 *   UDP port % 4 == 0  an echo socket;  UDP port % 4 == 2  a sink.
 *
 * Invariants, checked with abort() so they hold in every build:
 *   - every packet read is counted once: a drop under its parse reason,
 *     bad_dst (TCP or UDP to an unspecified, loopback, multicast or
 *     broadcast address), the ICMP counters, lwIP's fast path (non-SYN
 *     TCP), or at most one new
 *     TCP flow or SYN retry per bare SYN, at most one UDP refusal or drop
 *     per datagram; with offload, gso_in counts the packets whose virtio
 *     header has a GSO type;
 *   - every packet chute writes to the TUN parses, fits the MTU (64 KiB
 *     with offload) and has valid IPv4 header and L4 checksums, with a
 *     source address the client sent to; with offload its virtio header is
 *     zero, or asks the kernel to complete a TCP checksum (and then the
 *     completed checksum is valid), and may describe a TCP segmentation-
 *     offload packet (larger than the MSS the MTU gives, split at that MSS);
 *   - the flow table holds exactly the live TCP connections and UDP
 *     entries; it is empty once the TUN path stops;
 *   - lwIP's heap stays within MEM_SIZE; once the TUN path stops, no pcb
 *     still points at chute (callback argument, err/sent/poll callbacks),
 *     and after the leftover lwIP-owned pcbs (TIME_WAIT, unaccepted
 *     SYN_RCVD, closing) are aborted, the heap and the pcb, segment and
 *     pbuf pools are back to their state before the input;
 *   - ASan/UBSan and libFuzzer's leak check catch the rest.
 * DATAPATH_FUZZ_STATS=1 prints the accumulated counters at exit.
 */

/* datapath.c first: tun/tun.h must be read under the rename. */
#define tun_open datapath_fuzz_tun_open
#include "engine/datapath.c"
#undef tun_open

#include <arpa/inet.h>
#include <errno.h>
#include <linux/virtio_net.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lwip/memp.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/prot/tcp.h"
#include "lwip/stats.h"
#include "lwip/tcp.h"

#include "chute/chute.h"
#include "flow/flow.h"
#include "tun/tun_int.h" /* vnet: offload without a real device */
#include "fuzz.h"

#define MTU 1500
#define MAXPKT 65535 /* with offload */
#define MODE_OFFLOAD 0xc000
#define BATCH 64
#define LOOP_TURNS 4  /* loop passes after each batch: connect, accept, echo, reply */
#define MAX_ACCEPTED 64
#define MAX_ISS 32

static const char bundle[] =
    "local chute = require \"chute\"\n"
    "chute.config {\n"
    "  log_level = \"error\",\n"
    "  fallback = \"REJECT\",\n"
    "  tun = { name = \"fuzz0\", mtu = 1500, batch = 64 },\n"
    "  timeouts = { connect = 10, idle = 300, udp = 60 },\n"
    "}\n"
    "-- The two documentation addresses only (connect() sends them to loopback);\n"
    "-- odd ports are rejected, so both policies are fuzzed.\n"
    "function chute.route(flow)\n"
    "  local ip = flow.dst_ip\n"
    "  if ip ~= \"192.0.2.1\" and ip ~= \"2001:db8::1\" then return \"REJECT\" end\n"
    "  if flow.dst_port % 2 == 1 then return \"REJECT\" end\n"
    "  return \"DIRECT\"\n"
    "end\n";

/* A harness socket on loopback standing in for an upstream. */
struct endpoint {
    int fd;
    uint16_t port;
    ev_io w;
};

struct accepted {
    int fd;
    ev_io w;
};

/* The ISS of a SYN-ACK chute sent, by the client's view of the 4-tuple. */
struct iss {
    uint8_t version;
    uint8_t client[16], server[16];
    uint16_t cport, sport;
    uint32_t iss;
};

/* Totals over the run, for DATAPATH_FUZZ_STATS. */
struct totals {
    uint64_t inputs, pkts_in, pkts_out, drops[IP_ERR_COUNT], icmp_echo, icmp_other;
    uint64_t fast_path, conns, syn_dups, rst_sent, udp_flows, udp_rejected, udp_dropped;
    uint64_t accepted, echoed_tcp, echoed_udp, wq_drops, leftover_pcbs, ticks, heap_max;
    uint64_t bad_dst, syn_dropped, offload_inputs, gso_in, gso_out;
};

static struct {
    chute_engine *ce;
    struct engine *e;
    int offload;       /* this input runs with IFF_VNET_HDR */
    int tun_fd, peer;  /* the socketpair: chute's end, the harness's end */
    size_t queued;     /* packets written since the last batch */
    struct endpoint echo[2], refused[2], udp_echo[2], udp_sink[2]; /* [0] v4, [1] v6 */
    struct accepted acc[MAX_ACCEPTED];
    struct iss iss[MAX_ISS];
    size_t niss;
    size_t heap_base;
    size_t memp_base[MEMP_MAX];
    struct engine_dp_stats dp0;
    uint64_t fed, exp_drops[IP_ERR_COUNT], exp_icmp, exp_fast, exp_syn, exp_udp, exp_gso;
    uint64_t exp_bad_dst;
    int nif_fed[2];    /* a packet of this input went to lwIP's v4 / v6 address */
    struct totals t;
} h;

static uint8_t pkt[MAXPKT + TUN_VNET_HDR + 1], out[MAXPKT + TUN_VNET_HDR + 1], io[65536];

static unsigned
be16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

static uint32_t
be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void
put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* --- no traffic leaves loopback ------------------------------------------ */

/* The destinations route() may allow, in network order: 192.0.2.1 and
 * 2001:db8::1, documentation addresses that connect() below never lets
 * out. */
static const uint8_t up4[4] = {192, 0, 2, 1}, up6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1};

static int
is_upstream(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)sa)->sin_addr, up4, 4) == 0;
    return memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, up6, 16) == 0;
}

/* Every connect() of the process: chute's upstream TCP and UDP sockets
 * are the only callers on the TUN path (libc's own resolver calls an
 * internal alias, not this). A DIRECT socket is connected to the harness
 * socket on loopback instead of its address, so a UDP socket's send()s
 * go there too; anything else aborts before a packet is sent. */
int
connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    struct sockaddr_storage to;
    int type = 0;
    socklen_t tl = sizeof(type);

    if (sa == NULL || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
        return (int)syscall(SYS_connect, fd, sa, len); /* AF_UNIX, AF_UNSPEC */
    if (len < (sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6))) {
        errno = EINVAL;
        return -1;
    }
    if (!is_upstream(sa)) {
        char a[INET6_ADDRSTRLEN] = "?";
        const void *ip = sa->sa_family == AF_INET
                             ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                             : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
        inet_ntop(sa->sa_family, ip, a, sizeof(a));
        fprintf(stderr, "datapath_fuzz: connect to %s: route() must have rejected it, or chute "
                        "must have dropped it\n", a);
        abort();
    }
    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl);
    int v6 = sa->sa_family == AF_INET6;
    uint16_t port = ntohs(((const struct sockaddr_in *)sa)->sin_port); /* same offset in v6 */
    const struct endpoint *ep;
    if (type == SOCK_STREAM)
        ep = port % 4 == 0 ? &h.echo[v6] : &h.refused[v6];
    else if (type == SOCK_DGRAM)
        ep = port % 4 == 0 ? &h.udp_echo[v6] : &h.udp_sink[v6];
    else
        ep = NULL;
    if (ep == NULL || ep->fd < 0) {
        errno = ECONNREFUSED;
        return -1;
    }
    memset(&to, 0, sizeof(to));
    if (v6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&to;
        s->sin6_family = AF_INET6;
        s->sin6_addr = in6addr_loopback;
        s->sin6_port = htons(ep->port);
        len = sizeof(*s);
    } else {
        struct sockaddr_in *s = (struct sockaddr_in *)&to;
        s->sin_family = AF_INET;
        s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        s->sin_port = htons(ep->port);
        len = sizeof(*s);
    }
    return (int)syscall(SYS_connect, fd, &to, len);
}

/* --- the upstreams -------------------------------------------------------- */

static void
acc_close(struct accepted *a, int reset)
{
    ev_io_stop(h.e->loop, &a->w);
    if (reset) {
        struct linger lg = {1, 0};
        setsockopt(a->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    close(a->fd);
    a->fd = -1;
}

static void
on_echo_data(struct ev_loop *loop, ev_io *w, int revents)
{
    struct accepted *a = w->data;
    ssize_t n = read(a->fd, io, sizeof(io));
    if (n < 0 && errno == EAGAIN)
        return;
    if (n <= 0) {
        acc_close(a, 0);
        return;
    }
    if (io[0] == 'R') {
        acc_close(a, 1);
        return;
    }
    if (write(a->fd, io, (size_t)n) > 0)
        h.t.echoed_tcp++;
    if (io[0] == 'Q')
        acc_close(a, 0);
}

static void
on_echo_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    struct endpoint *ep = w->data;
    int fd;
    while ((fd = accept4(ep->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
        struct accepted *a = NULL;
        for (size_t i = 0; i < MAX_ACCEPTED && a == NULL; i++)
            if (h.acc[i].fd < 0)
                a = &h.acc[i];
        if (a == NULL) {
            close(fd); /* chute sees the upstream close at once */
            continue;
        }
        a->fd = fd;
        ev_io_init(&a->w, on_echo_data, fd, EV_READ);
        a->w.data = a;
        ev_io_start(loop, &a->w);
        h.t.accepted++;
    }
}

static void
on_udp(struct ev_loop *loop, ev_io *w, int revents)
{
    struct endpoint *ep = w->data;
    struct sockaddr_storage from;
    socklen_t fl;
    ssize_t n;
    int echo = ep == &h.udp_echo[0] || ep == &h.udp_echo[1];
    while ((n = recvfrom(ep->fd, io, sizeof(io), 0, (struct sockaddr *)&from,
                         (fl = sizeof(from), &fl))) >= 0) {
        if (echo && sendto(ep->fd, io, (size_t)n, 0, (struct sockaddr *)&from, fl) >= 0)
            h.t.echoed_udp++;
    }
}

static void
endpoint_open(struct endpoint *ep, int v6, int type, int listening)
{
    struct sockaddr_storage ss;
    socklen_t len = v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int one = 1;

    ep->fd = socket(v6 ? AF_INET6 : AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ep->fd < 0)
        return;
    memset(&ss, 0, sizeof(ss));
    if (v6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
        setsockopt(ep->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        s->sin6_family = AF_INET6;
        s->sin6_addr = in6addr_loopback;
    } else {
        struct sockaddr_in *s = (struct sockaddr_in *)&ss;
        s->sin_family = AF_INET;
        s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    if (bind(ep->fd, (struct sockaddr *)&ss, len) != 0 ||
        getsockname(ep->fd, (struct sockaddr *)&ss, &len) != 0 ||
        (listening && listen(ep->fd, 128) != 0)) {
        close(ep->fd); /* no IPv6 loopback, say: connects there fail, as they would */
        ep->fd = -1;
        return;
    }
    ep->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (type == SOCK_DGRAM)
        ev_io_init(&ep->w, on_udp, ep->fd, EV_READ);
    else if (listening)
        ev_io_init(&ep->w, on_echo_accept, ep->fd, EV_READ);
    else
        return; /* refused: bound, never listening, never read */
    ep->w.data = ep;
    ev_io_start(h.e->loop, &ep->w);
}

/* --- the TUN path around one input ---------------------------------------- */

/* tun_open as datapath.c sees it: the engine's end of the socketpair. */
struct tun *
datapath_fuzz_tun_open(const struct tun_opts *o, char *err, size_t errlen)
{
    struct tun *t = tun_attach_fd(h.tun_fd, o->mtu, o->batch);
    if (t != NULL && h.offload) {
        /* What tun_open() does after TUNSETOFFLOAD: buffers for 64 KiB. */
        tun_io_fini(t);
        t->vnet = 1;
        if (tun_io_init(t, o->batch) != 0) {
            tun_close(t);
            t = NULL;
        }
    }
    if (t == NULL)
        snprintf(err, errlen, "tun_attach_fd: out of memory");
    return t;
}

static void
setup(void)
{
    char err[512] = "";
    CHECK(chute_engine_new(&h.ce, NULL) == 0);
    if (chute_engine_load_string(h.ce, bundle, err, sizeof(err)) != 0) {
        fprintf(stderr, "datapath_fuzz: bundle: %s\n", err);
        abort();
    }
    /* The engine is the first member of chute_engine (core/engine/engine.c). */
    h.e = (struct engine *)h.ce;
    CHECK(h.e->script != NULL && h.e->tun == NULL);
    for (int v6 = 0; v6 < 2; v6++) {
        endpoint_open(&h.echo[v6], v6, SOCK_STREAM, 1);
        endpoint_open(&h.refused[v6], v6, SOCK_STREAM, 0);
        endpoint_open(&h.udp_echo[v6], v6, SOCK_DGRAM, 0);
        endpoint_open(&h.udp_sink[v6], v6, SOCK_DGRAM, 0);
    }
    CHECK(h.echo[0].fd >= 0 && h.refused[0].fd >= 0 && h.udp_echo[0].fd >= 0);
    for (size_t i = 0; i < MAX_ACCEPTED; i++)
        h.acc[i].fd = -1;
}

static size_t
memp_used(int i)
{
    return lwip_stats.memp[i]->used;
}

static void
start(int offload)
{
    char err[512] = "";
    int sp[2];
    int big = 1 << 20;

    CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) == 0);
    /* Room for a batch each way between drains (the kernel caps it). */
    setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    setsockopt(sp[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    h.tun_fd = sp[0];
    h.peer = sp[1];
    h.offload = offload;
    if (engine_tun_start(h.e, err, sizeof(err)) != 0) {
        fprintf(stderr, "datapath_fuzz: engine_tun_start: %s\n", err);
        abort();
    }
    CHECK(h.e->tun != NULL && h.e->udp != NULL && tun_mtu(h.e->tun) == MTU);
    CHECK(tun_offload(h.e->tun) == offload);
    h.t.offload_inputs += (uint64_t)offload;
    if (h.t.inputs++ == 0) { /* lwIP started in the first netstack_init */
        h.heap_base = lwip_stats.mem.used;
        for (int i = 0; i < MEMP_MAX; i++)
            h.memp_base[i] = memp_used(i);
    }
    h.dp0 = h.e->dp;
    h.queued = h.niss = 0;
    h.fed = h.exp_icmp = h.exp_fast = h.exp_syn = h.exp_udp = h.exp_gso = h.exp_bad_dst = 0;
    memset(h.exp_drops, 0, sizeof(h.exp_drops));
    h.nif_fed[0] = h.nif_fed[1] = 0;
}

static struct iss *
iss_find(int version, const uint8_t *client, const uint8_t *server, uint16_t cport,
         uint16_t sport)
{
    for (size_t i = 0; i < h.niss && i < MAX_ISS; i++) {
        struct iss *s = &h.iss[i];
        if (s->version == version && s->cport == cport && s->sport == sport &&
            memcmp(s->client, client, 16) == 0 && memcmp(s->server, server, 16) == 0)
            return s;
    }
    return NULL;
}

/* Like CHECK, for a packet chute wrote: shows the packet first. */
#define CHECK_OUT(cond, p, n)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "datapath_fuzz: packet written to the TUN (%zu bytes):", (size_t)(n)); \
            for (size_t i_ = 0; i_ < (size_t)(n); i_++)                                            \
                fprintf(stderr, "%s%02x", i_ % 16 ? " " : "\n  ", (p)[i_]);                        \
            fprintf(stderr, "\n");                                                                 \
            CHECK(cond);                                                                           \
        }                                                                                          \
    } while (0)

/* lwIP's netif addresses (core/netstack/netif.c): chute answers as the
 * address the client sent to, so these are a source on the TUN only if a
 * packet of this input went to them. */
static const uint8_t nif4[16] = {10, 77, 0, 2}, nif6[16] = {0xfd, [15] = 2};

/* The destinations chute must drop before lwIP or the UDP NAT sees them
 * (unspecified, loopback, multicast, broadcast), written out here on their
 * own as the oracle of datapath.c's check. */
static int
unroutable(const struct ip_view *v)
{
    static const uint8_t any[16], loop6[16] = {[15] = 1};
    if (v->version == 4)
        return v->dst[0] == 0 || v->dst[0] == 127 || v->dst[0] >= 224;
    return v->dst[0] == 0xff || !memcmp(v->dst, any, 16) || !memcmp(v->dst, loop6, 16);
}

/* A packet with a virtio header |g| as the kernel takes it: it completes
 * the checksum (CHECKSUM_PARTIAL: the sum from csum_start on, folded and
 * inverted into csum_start + csum_offset) and, for a segmentation-offload
 * packet, cuts it at gso_size. Leaves |p| with the completed checksum. */
static void
check_partial(const struct virtio_net_hdr *g, uint8_t *p, size_t n, const struct ip_view *v)
{
    size_t thl = (size_t)(v->l4[12] >> 4) * 4;
    uint16_t c;

    CHECK_OUT(g->flags == VIRTIO_NET_HDR_F_NEEDS_CSUM, p, n);
    CHECK_OUT(v->proto == IPPROTO_TCP && g->csum_start == v->ip_hlen && g->csum_offset == 16, p, n);
    CHECK_OUT(g->hdr_len == v->ip_hlen + thl, p, n);
    c = ip_csum_fold(ip_csum_add(0, p + g->csum_start, n - g->csum_start));
    memcpy(p + g->csum_start + g->csum_offset, &c, 2);
    if (g->gso_type == VIRTIO_NET_HDR_GSO_NONE) {
        CHECK_OUT(g->gso_size == 0, p, n);
        return;
    }
    CHECK_OUT(g->gso_type == (v->version == 4 ? VIRTIO_NET_HDR_GSO_TCPV4 : VIRTIO_NET_HDR_GSO_TCPV6),
              p, n);
    CHECK_OUT(v->payload_len > g->gso_size, p, n);
    CHECK_OUT(g->gso_size == MTU - (v->version == 4 ? 40 : 60), p, n);
    h.t.gso_out++;
}

/* A packet chute wrote to the TUN (with offload, after its virtio header). */
static void
check_out(uint8_t *p, size_t n)
{
    struct virtio_net_hdr g;
    struct ip_view v;
    uint32_t s = 0;

    if (h.offload) {
        CHECK_OUT(n > TUN_VNET_HDR, p, n);
        memcpy(&g, p, TUN_VNET_HDR);
        p += TUN_VNET_HDR;
        n -= TUN_VNET_HDR;
    }
    CHECK_OUT(n > 0 && n <= (h.offload ? MAXPKT : MTU), p, n);
    CHECK_OUT(ip_view_parse(&v, p, n) == IP_OK && v.pkt_len == n, p, n);
    if (h.offload) {
        static const struct virtio_net_hdr none;
        if (g.flags != 0)
            check_partial(&g, p, n, &v);
        else
            CHECK_OUT(memcmp(&g, &none, TUN_VNET_HDR) == 0, p, n);
    }
    if (v.version == 4)
        CHECK_OUT(ip_csum_fold(ip_csum_add(0, p, v.ip_hlen)) == 0, p, n);
    if (v.proto != IPPROTO_ICMP)
        s = ip_csum_pseudo(v.version, v.src, v.dst, v.proto, v.l4_len);
    CHECK_OUT(ip_csum_fold(ip_csum_add(s, v.l4, v.l4_len)) == 0, p, n);
    CHECK_OUT(h.nif_fed[v.version == 6] ||
                  memcmp(v.src, v.version == 4 ? nif4 : nif6, 16) != 0, p, n);
    if (v.proto == IPPROTO_TCP && (v.tcp_flags & (TCP_SYN | TCP_ACK)) == (TCP_SYN | TCP_ACK)) {
        struct iss *e = iss_find(v.version, v.dst, v.src, v.dport, v.sport);
        if (e == NULL) {
            e = &h.iss[h.niss++ % MAX_ISS];
            e->version = v.version;
            memcpy(e->client, v.dst, 16);
            memcpy(e->server, v.src, 16);
            e->cport = v.dport;
            e->sport = v.sport;
        }
        e->iss = be32(v.l4 + 4);
    }
}

static void
drain(void)
{
    ssize_t n;
    while ((n = recv(h.peer, out, sizeof(out), MSG_TRUNC)) >= 0) {
        CHECK((size_t)n <= sizeof(out));
        check_out(out, (size_t)n);
        h.t.pkts_out++;
    }
    CHECK(errno == EAGAIN);
}

static void
check_heap(void)
{
    CHECK(lwip_stats.mem.used <= MEM_SIZE && lwip_stats.mem.max <= MEM_SIZE);
}

static void
run_batch(void)
{
    if (h.queued > 0)
        on_tun(h.e->loop, &h.e->_tun_io, EV_READ);
    h.queued = 0;
    drain();
    for (int i = 0; i < LOOP_TURNS; i++) {
        ev_run(h.e->loop, EVRUN_NOWAIT);
        drain();
    }
    check_heap();
}

static void
tick(void)
{
    tcp_tmr();
    tcp_tmr();
    h.t.ticks++;
    tun_wq_flush(h.e->tun);
    drain();
}

/* Writes one packet into the TUN, after fixing its ACK number, and counts
 * where the engine must put it. With offload, |data| starts with the
 * virtio header. */
static void
feed(const uint8_t *data, size_t len)
{
    size_t vh = h.offload ? TUN_VNET_HDR : 0, max = (h.offload ? MAXPKT : MTU) + vh;
    size_t n = len < max ? len : max;         /* what the read returns */
    size_t w = len < max + 1 ? len : max + 1; /* one byte more: the read truncates */
    uint8_t *ip = pkt + vh;
    struct ip_view v;
    int r;

    if (len <= vh)
        return;
    memcpy(pkt, data, w);
    r = ip_view_parse(&v, ip, n - vh);
    if (r == IP_OK && v.proto == IPPROTO_TCP && (v.tcp_flags & TCP_ACK)) {
        const struct iss *s = iss_find(v.version, v.src, v.dst, v.sport, v.dport);
        if (s != NULL)
            put32(ip + v.ip_hlen + 8, be32(v.l4 + 8) + s->iss);
    }
    if (send(h.peer, pkt, w, 0) < 0) {
        CHECK(errno == EAGAIN || errno == ENOBUFS);
        run_batch(); /* the socket is full: let the engine read what it has */
        if (send(h.peer, pkt, w, 0) < 0)
            return;
    }
    h.fed++;
    if (h.offload && ((const struct virtio_net_hdr *)pkt)->gso_type != VIRTIO_NET_HDR_GSO_NONE)
        h.exp_gso++;
    if (r == IP_OK && memcmp(v.dst, v.version == 4 ? nif4 : nif6, 16) == 0)
        h.nif_fed[v.version == 6] = 1;
    if (++h.queued == BATCH)
        run_batch();
    if (r != IP_OK) {
        CHECK(r < 0 && r > -IP_ERR_COUNT);
        h.exp_drops[-r]++;
    } else if ((v.proto == IPPROTO_TCP || v.proto == IPPROTO_UDP) && unroutable(&v)) {
        h.exp_bad_dst++;
    } else if (v.proto == IPPROTO_TCP) {
        if ((v.tcp_flags & (TCP_SYN | TCP_ACK | TCP_RST)) == TCP_SYN)
            h.exp_syn++;
        else
            h.exp_fast++;
    } else if (v.proto == IPPROTO_UDP) {
        h.exp_udp++;
    } else {
        h.exp_icmp++;
    }
}

/* Every packet read went exactly one way, and the tables agree. */
static void
check_counters(void)
{
    struct tun_stats ts;
    struct netstack_stats ns;
    struct flow_udp_stats us;
    struct flow_table_stats fs;
    const struct engine_dp_stats *dp = &h.e->dp;

    tun_stats(h.e->tun, &ts);
    netstack_stats(&ns);
    flow_udp_stats(h.e->udp, &us);
    flow_table_stats(h.e->flows, &fs);
    CHECK(ts.pkts_in == h.fed && ts.gso_in == h.exp_gso);
    for (int i = 0; i < 8; i++)
        CHECK(dp->drops[i] - h.dp0.drops[i] == (i < IP_ERR_COUNT ? h.exp_drops[i] : 0));
    CHECK(dp->icmp_echo - h.dp0.icmp_echo + dp->icmp_other - h.dp0.icmp_other == h.exp_icmp);
    CHECK(ns.fast_path == h.exp_fast);
    CHECK(dp->bad_dst - h.dp0.bad_dst == h.exp_bad_dst);
    CHECK(ns.conns_total + ns.syn_dups + ns.syn_dropped <= h.exp_syn);
    /* A RST answers a rejected SYN or a failed connect: once per flow. */
    CHECK(ns.conns_active <= ns.conns_total && ns.rst_sent <= ns.conns_total);
    CHECK(us.total <= h.exp_udp && us.active <= us.total);
    CHECK(us.rejected + us.dropped <= h.exp_udp);
    CHECK(fs.active == ns.conns_active + us.active);
    CHECK(ns.heap_used <= ns.heap_size && ns.heap_max <= ns.heap_size);

    for (int i = 0; i < IP_ERR_COUNT; i++)
        h.t.drops[i] += h.exp_drops[i];
    h.t.pkts_in += h.fed;
    h.t.icmp_echo += dp->icmp_echo - h.dp0.icmp_echo;
    h.t.icmp_other += dp->icmp_other - h.dp0.icmp_other;
    h.t.fast_path += ns.fast_path;
    h.t.conns += ns.conns_total;
    h.t.syn_dups += ns.syn_dups;
    h.t.rst_sent += ns.rst_sent;
    h.t.udp_flows += us.total;
    h.t.udp_rejected += us.rejected;
    h.t.udp_dropped += us.dropped;
    h.t.bad_dst += h.exp_bad_dst;
    h.t.syn_dropped += ns.syn_dropped;
    h.t.wq_drops += ts.wq_drops;
    h.t.gso_in += ts.gso_in;
    if (ns.heap_max > h.t.heap_max)
        h.t.heap_max = ns.heap_max;
}

/* A pcb lwIP keeps after chute let go of it must not point back at chute. */
static void
check_orphans(struct tcp_pcb *list)
{
    for (struct tcp_pcb *p = list; p != NULL; p = p->next) {
        CHECK(p->callback_arg == NULL && p->errf == NULL && p->sent == NULL);
        CHECK(p->poll == NULL && (p->recv == NULL || p->recv == tcp_recv_null));
        h.t.leftover_pcbs++;
    }
}

static void
stop(void)
{
    struct flow_table_stats fs;
    struct endpoint *udp[4] = {&h.udp_echo[0], &h.udp_echo[1], &h.udp_sink[0], &h.udp_sink[1]};

    for (size_t i = 0; i < MAX_ACCEPTED; i++)
        if (h.acc[i].fd >= 0)
            acc_close(&h.acc[i], 0);
    engine_tun_stop(h.e);
    CHECK(h.e->tun == NULL && h.e->udp == NULL);
    drain(); /* the RSTs of the aborted connections */
    close(h.tun_fd);
    close(h.peer);
    flow_table_stats(h.e->flows, &fs);
    CHECK(fs.active == 0);

    /* lwIP's leftovers: then back to a clean stack for the next input. */
    CHECK(tcp_listen_pcbs.listen_pcbs == NULL && tcp_bound_pcbs == NULL);
    check_orphans(tcp_active_pcbs);
    check_orphans(tcp_tw_pcbs);
    while (tcp_active_pcbs != NULL)
        tcp_abort(tcp_active_pcbs); /* no netif: the RST goes nowhere */
    while (tcp_tw_pcbs != NULL)
        tcp_abort(tcp_tw_pcbs);
    check_heap();
    CHECK(lwip_stats.mem.used == h.heap_base);
    CHECK(memp_used(MEMP_TCP_PCB) == h.memp_base[MEMP_TCP_PCB]);
    CHECK(memp_used(MEMP_TCP_PCB_LISTEN) == h.memp_base[MEMP_TCP_PCB_LISTEN]);
    CHECK(memp_used(MEMP_TCP_SEG) == h.memp_base[MEMP_TCP_SEG]);
    CHECK(memp_used(MEMP_PBUF) == h.memp_base[MEMP_PBUF]);
    CHECK(memp_used(MEMP_PBUF_POOL) == h.memp_base[MEMP_PBUF_POOL]);

    /* Upstream leftovers: connections never accepted, datagrams unread. */
    for (int v6 = 0; v6 < 2; v6++) {
        int fd;
        if (h.echo[v6].fd >= 0)
            while ((fd = accept4(h.echo[v6].fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
                close(fd);
    }
    for (int i = 0; i < 4; i++)
        if (udp[i]->fd >= 0)
            while (recv(udp[i]->fd, io, sizeof(io), 0) >= 0)
                continue;
}

static void
report(void)
{
    const struct totals *t = &h.t;
    fprintf(stderr,
            "datapath_fuzz: inputs=%llu pkts_in=%llu pkts_out=%llu drops=%llu/%llu/%llu/%llu/"
            "%llu/%llu icmp_echo=%llu icmp_other=%llu fast_path=%llu tcp_flows=%llu "
            "syn_dups=%llu rst_sent=%llu udp_flows=%llu udp_rejected=%llu udp_dropped=%llu "
            "accepted=%llu echoed_tcp=%llu echoed_udp=%llu wq_drops=%llu leftover_pcbs=%llu "
            "ticks=%llu heap_max=%llu bad_dst=%llu syn_dropped=%llu offload_inputs=%llu "
            "gso_in=%llu gso_out=%llu\n",
            (unsigned long long)t->inputs, (unsigned long long)t->pkts_in,
            (unsigned long long)t->pkts_out, (unsigned long long)t->drops[1],
            (unsigned long long)t->drops[2], (unsigned long long)t->drops[3],
            (unsigned long long)t->drops[4], (unsigned long long)t->drops[5],
            (unsigned long long)t->drops[6], (unsigned long long)t->icmp_echo,
            (unsigned long long)t->icmp_other, (unsigned long long)t->fast_path,
            (unsigned long long)t->conns, (unsigned long long)t->syn_dups,
            (unsigned long long)t->rst_sent, (unsigned long long)t->udp_flows,
            (unsigned long long)t->udp_rejected, (unsigned long long)t->udp_dropped,
            (unsigned long long)t->accepted, (unsigned long long)t->echoed_tcp,
            (unsigned long long)t->echoed_udp, (unsigned long long)t->wq_drops,
            (unsigned long long)t->leftover_pcbs, (unsigned long long)t->ticks,
            (unsigned long long)t->heap_max, (unsigned long long)t->bad_dst,
            (unsigned long long)t->syn_dropped,
            (unsigned long long)t->offload_inputs, (unsigned long long)t->gso_in,
            (unsigned long long)t->gso_out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (h.e == NULL) {
        setup();
        if (getenv("DATAPATH_FUZZ_STATS") != NULL)
            atexit(report);
    }
    if (size >= 2 && be16(data) == MODE_OFFLOAD) {
        start(1);
        data += 2;
        size -= 2;
    } else {
        start(0);
    }
    while (size >= 2) {
        unsigned hdr = be16(data);
        size_t len = hdr & 0x3fff;
        data += 2;
        size -= 2;
        if (len > size)
            len = size;
        if (len > 0)
            feed(data, len);
        data += len;
        size -= len;
        if (hdr & 0xc000)
            run_batch();
        if (hdr & 0x4000) {
            tick();
            run_batch();
        }
    }
    run_batch();
    check_counters();
    stop();
    return 0;
}
