/* core/netstack without an engine: the held SYN, the handshake and the
 * io_stream over an lwIP connection (conn.c), the RST (rst.c), injection
 * (input.c) and the netif's output (netif.c).
 *
 * The fixture is datapath_fuzz.c's: the TUN is one end of a SOCK_DGRAM
 * socketpair wrapped by tun_attach_fd (MTU 1500, no offload) and the test
 * holds the other end. A tiny client TCP lives here: it builds IPv4/IPv6
 * segments with lwIP's wire-format headers (lwip/prot/) and ip/ip.h's
 * checksums, hands them to
 * netstack_tcp_input as the engine's data path would after ip_view_parse,
 * and reads what lwIP wrote from the socketpair after netstack_flush and
 * tun_wq_flush. Its SYNs carry MSS 1460 (1440 on IPv6) and a window scale
 * option of 0 (Linux always sends one): lwIP then scales its own window by
 * TCP_RCV_SCALE, while the client's stays 65535 bytes.
 *
 * Time. The handshake timeout is a libev timer on the test's loop: a
 * timeout of 0 fires at the next ev_run, so nothing waits. lwIP's clock is
 * sys_now() (core/netstack/sys.c), which reads CLOCK_MONOTONIC itself, not
 * the loop's clock, so ev_now_update/ev_run cannot move it: where lwIP
 * needs time the test calls its timers directly, tcp_fasttmr() (delayed
 * ACKs) and tcp_tmr() (250 ms each: retransmission, TIME_WAIT expiry), as
 * datapath_fuzz.c does. Only netstack_poll's sys_check_timeouts reads the
 * real clock; the tests that call it tolerate a timer tick more.
 *
 * lwIP keeps its state in globals: each test starts the netstack
 * (netstack_init) and stops it (netstack_fini), then aborts whatever pcbs
 * lwIP still holds (TIME_WAIT, closing) after checking that none of them
 * points back at chute, and checks that the heap and the pools are back
 * where they started. Every owner callback asserts that it does not run
 * inside netstack_tcp_input. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lwip/mem.h"
#include "lwip/memp.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/prot/ip4.h"
#include "lwip/prot/ip6.h"
#include "lwip/prot/tcp.h"
#include "lwip/stats.h"

#include "io/io.h"
#include "ip/ip.h"
#include "log/log.h"
#include "netstack/netstack.h"
#include "netstack/netstack_int.h" /* NETSTACK_MEM_HIGH, NETSTACK_MEM_LOW */
#include "tun/tun.h"

#define MTU 1500
#define MAX_CLIENTS 256
#define QMAX 4096          /* packets read from the TUN, not yet taken */
#define SYN_OPT_LEN 8      /* MSS, NOP, window scale */
#define FILL_SEG 60000     /* client bytes per segment when filling the heap */
/* tcp_sndbuf() is a u16 (TCPWND16): one write takes at most this much. */
#define ROOM_MAX (TCP_SND_BUF < 0xFFFF ? TCP_SND_BUF : 0xFFFF)

/* One client connection: the client's TCP (this file) and what the layer
 * above saw of it (handler and stream callbacks). */
struct client {
    int version;
    uint8_t src[16], dst[16]; /* client, server (the original destination) */
    uint16_t sport, dport;
    uint32_t isn, snd_nxt; /* the client's */
    uint32_t rcv_nxt;      /* the next byte expected from lwIP */
    uint32_t wnd;          /* the last window lwIP advertised, in bytes */
    int fin_in, rst_in;    /* lwIP sent FIN, RST */
    /* the layer above */
    struct netstack_conn *held;
    struct io_stream *s;
    int syns, established, gone;
    const char *why;
    int accept_in_syn;
    /* the stream's owner */
    int readable, drains;
    int read_in_cb;                         /* on_readable reads all it can */
    int close_in_readable, close_in_drain;  /* then closes (0) */
    uint8_t got[8192];                      /* what on_readable read */
    size_t got_len;
    int got_eof;
    const uint8_t *out; /* on_drain writes what is left of out[0..out_len) */
    size_t out_len, out_off;
};

/* A segment lwIP wrote, with its own copy of the packet. */
struct seg {
    uint8_t pkt[MTU];
    struct ip_view v;
    uint8_t flags;
    uint32_t seq, ack, wnd; /* wnd in bytes: scaled, except on a SYN */
    int mss, wscale;        /* SYN options, -1 when absent */
    int next;               /* its bytes (or FIN) were the next the client expected */
    const uint8_t *data;
    size_t len;
};

static struct {
    struct ev_loop *loop;
    int fd, peer;
    struct tun *tun;
    int in_input; /* inside netstack_tcp_input */
    int based;
    size_t heap_base, memp_base[MEMP_MAX];
    int tun_mtu; /* the TUN's (setup_big_tun: packets of offload's size); lwIP's is MTU */
} F;

static struct client clients[MAX_CLIENTS];
static size_t nclients;

static struct {
    size_t n;
    uint16_t len[QMAX];
    uint8_t taken[QMAX];
    uint8_t pkt[QMAX][MTU];
} q;

static uint8_t inbuf[65536];

static const uint8_t cli4[16] = {10, 0, 0, 2}, srv4[16] = {192, 0, 2, 1};
static const uint8_t cli6[16] = {0xfd, 0, [15] = 2};
static const uint8_t srv6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1};

/* The byte at |i| of every test stream. */
static uint8_t
pat(size_t i)
{
    return (uint8_t)(i * 131 + (i >> 9) + 7);
}

static void
fill_pat(uint8_t *p, size_t off, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pat(off + i);
}

static void
check_pat(const uint8_t *p, size_t off, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(off + i))
            fail_msg("byte %zu is %02x, want %02x", off + i, p[i], pat(off + i));
}

/* ---- the TUN's other end ----------------------------------------------- */

/* Takes what lwIP wrote: every packet parses, fits the MTU and has valid
 * IPv4 header and TCP checksums. */
static void
flush_out(void)
{
    uint8_t buf[MTU + 1];
    ssize_t n;

    netstack_flush();
    tun_wq_flush(F.tun);
    while ((n = recv(F.peer, buf, sizeof(buf), MSG_TRUNC)) >= 0) {
        struct ip_view v;
        assert_true(n > 0 && n <= MTU);
        assert_int_equal(ip_view_parse(&v, buf, (size_t)n), IP_OK);
        assert_int_equal(v.pkt_len, n);
        assert_int_equal(v.proto, IPPROTO_TCP);
        if (v.version == 4)
            assert_int_equal(ip_csum_fold(ip_csum_add(0, buf, v.ip_hlen)), 0);
        uint32_t s = ip_csum_pseudo(v.version, v.src, v.dst, IPPROTO_TCP, v.l4_len);
        assert_int_equal(ip_csum_fold(ip_csum_add(s, v.l4, v.l4_len)), 0);
        if (q.n == QMAX) { /* drop the taken ones */
            size_t k = 0;
            for (size_t i = 0; i < q.n; i++) {
                if (q.taken[i])
                    continue;
                memmove(q.pkt[k], q.pkt[i], q.len[i]);
                q.len[k] = q.len[i];
                q.taken[k++] = 0;
            }
            q.n = k;
            assert_true(q.n < QMAX);
        }
        memcpy(q.pkt[q.n], buf, (size_t)n);
        q.len[q.n] = (uint16_t)n;
        q.taken[q.n++] = 0;
    }
    assert_int_equal(errno, EAGAIN);
}

/* Packets read and not taken by any client. */
static size_t
q_untaken(void)
{
    size_t k = 0;
    flush_out();
    for (size_t i = 0; i < q.n; i++)
        k += !q.taken[i];
    return k;
}

static void
parse_opts(struct seg *g)
{
    const uint8_t *o = g->v.l4 + 20, *end = g->v.l4 + (g->v.l4[12] >> 4) * 4;
    g->mss = g->wscale = -1;
    while (o < end && *o != 0) {
        if (*o == 1) {
            o++;
            continue;
        }
        assert_true(o + 1 < end && o[1] >= 2 && o + o[1] <= end);
        if (o[0] == 2 && o[1] == 4)
            g->mss = o[2] << 8 | o[3];
        if (o[0] == 3 && o[1] == 3)
            g->wscale = o[2];
        o += o[1];
    }
}

/* The next segment lwIP sent to |c|; 0 when there is none. The client's
 * receive side follows it: in-order data and FIN move rcv_nxt. */
static int
pop(struct client *c, struct seg *g)
{
    flush_out();
    for (size_t i = 0; i < q.n; i++) {
        struct ip_view v;
        if (q.taken[i])
            continue;
        assert_int_equal(ip_view_parse(&v, q.pkt[i], q.len[i]), IP_OK);
        if (v.version != c->version || v.sport != c->dport || v.dport != c->sport ||
            memcmp(v.src, c->dst, 16) != 0 || memcmp(v.dst, c->src, 16) != 0)
            continue;
        q.taken[i] = 1;
        memcpy(g->pkt, q.pkt[i], q.len[i]);
        assert_int_equal(ip_view_parse(&g->v, g->pkt, q.len[i]), IP_OK);
        const struct tcp_hdr *th = (const struct tcp_hdr *)g->v.l4;
        g->flags = g->v.tcp_flags;
        g->seq = lwip_ntohl(th->seqno);
        g->ack = lwip_ntohl(th->ackno);
        g->wnd = lwip_ntohs(th->wnd);
        if (!(g->flags & TCP_SYN))
            g->wnd <<= TCP_RCV_SCALE;
        g->data = g->v.payload;
        g->len = g->v.payload_len;
        parse_opts(g);
        g->next = 0;
        if (g->flags & TCP_RST) {
            c->rst_in = 1;
            return 1;
        }
        c->wnd = g->wnd;
        if (!(g->flags & TCP_SYN) && g->seq == c->rcv_nxt) {
            g->next = 1;
            c->rcv_nxt += (uint32_t)g->len;
            if (g->flags & TCP_FIN) {
                c->rcv_nxt++;
                c->fin_in = 1;
            }
        }
        return 1;
    }
    return 0;
}

/* Drops every segment sent to |c| so far; returns how many there were. */
static int
discard(struct client *c)
{
    struct seg g;
    int n = 0;
    while (pop(c, &g))
        n++;
    return n;
}

/* ---- the client's TCP ---------------------------------------------------- */

static struct client *
new_client(int version, uint16_t sport, uint16_t dport)
{
    assert_true(nclients < MAX_CLIENTS);
    struct client *c = &clients[nclients++];
    memset(c, 0, sizeof(*c));
    c->version = version;
    memcpy(c->src, version == 4 ? cli4 : cli6, 16);
    memcpy(c->dst, version == 4 ? srv4 : srv6, 16);
    c->sport = sport;
    c->dport = dport;
    c->isn = 0x10000000u + sport * 7919u;
    return c;
}

static struct client *
client_of(const struct ip_view *v)
{
    for (size_t i = 0; i < nclients; i++) {
        struct client *c = &clients[i];
        if (c->version == v->version && c->sport == v->sport && c->dport == v->dport &&
            memcmp(c->src, v->src, 16) == 0 && memcmp(c->dst, v->dst, 16) == 0)
            return c;
    }
    return NULL;
}

static size_t
build(uint8_t *out, const struct client *c, uint8_t flags, uint32_t seq, uint32_t ack,
      const uint8_t *opt, size_t optlen, const void *data, size_t len)
{
    size_t ihl = c->version == 4 ? 20 : 40, thl = 20 + optlen, total = ihl + thl + len;
    struct tcp_hdr *th = (struct tcp_hdr *)(out + ihl);

    assert_true(optlen % 4 == 0 && total <= sizeof(inbuf));
    memset(out, 0, ihl + thl);
    if (c->version == 4) {
        struct ip_hdr *h = (struct ip_hdr *)out;
        IPH_VHL_SET(h, 4, 5);
        IPH_LEN_SET(h, lwip_htons((u16_t)total));
        IPH_TTL_SET(h, 64);
        IPH_PROTO_SET(h, IPPROTO_TCP);
        memcpy(&h->src, c->src, 4);
        memcpy(&h->dest, c->dst, 4);
        IPH_CHKSUM_SET(h, ip_csum_fold(ip_csum_add(0, h, 20)));
    } else {
        struct ip6_hdr *h = (struct ip6_hdr *)out;
        IP6H_VTCFL_SET(h, 6, 0, 0);
        IP6H_PLEN_SET(h, (u16_t)(thl + len));
        IP6H_NEXTH_SET(h, IPPROTO_TCP);
        IP6H_HOPLIM_SET(h, 64);
        memcpy(&h->src, c->src, 16);
        memcpy(&h->dest, c->dst, 16);
    }
    th->src = lwip_htons(c->sport);
    th->dest = lwip_htons(c->dport);
    th->seqno = lwip_htonl(seq);
    th->ackno = lwip_htonl(ack);
    TCPH_HDRLEN_FLAGS_SET(th, thl / 4, flags);
    th->wnd = PP_HTONS(65535);
    if (optlen > 0)
        memcpy(th + 1, opt, optlen);
    if (len > 0)
        memcpy((uint8_t *)th + thl, data, len);
    th->chksum = ip_csum_fold(ip_csum_add(
        ip_csum_pseudo(c->version, c->src, c->dst, IPPROTO_TCP, (uint32_t)(thl + len)), th,
        thl + len));
    return total;
}

/* The engine's data path: parse, then netstack_tcp_input. */
static void
inject(size_t len)
{
    struct ip_view v;
    assert_int_equal(ip_view_parse(&v, inbuf, len), IP_OK);
    F.in_input = 1;
    netstack_tcp_input(&v);
    F.in_input = 0;
}

/* A segment at snd_nxt (acknowledging rcv_nxt when |flags| has ACK). */
static void
send_seg(struct client *c, uint8_t flags, const void *data, size_t len)
{
    inject(build(inbuf, c, flags, c->snd_nxt, flags & TCP_ACK ? c->rcv_nxt : 0, NULL, 0, data,
                 len));
    c->snd_nxt += (uint32_t)len + !!(flags & TCP_FIN);
}

static void
send_data(struct client *c, const void *data, size_t len)
{
    send_seg(c, TCP_ACK | TCP_PSH, data, len);
}

/* A SYN from the client's ISN, with |len| bytes of data (TFO) if any. */
static void
send_syn(struct client *c, const void *data, size_t len)
{
    unsigned mss = MTU - (c->version == 4 ? 40 : 60);
    uint8_t opt[SYN_OPT_LEN] = {2, 4, (uint8_t)(mss >> 8), (uint8_t)mss, 1, 3, 3, 0};
    c->snd_nxt = c->isn;
    inject(build(inbuf, c, TCP_SYN, c->isn, 0, opt, sizeof(opt), data, len));
    c->snd_nxt = c->isn + 1;
}

/* Takes lwIP's SYN-ACK for |c| and checks it. */
static void
take_synack(struct client *c)
{
    struct seg g;
    assert_true(pop(c, &g));
    assert_int_equal(g.flags, TCP_SYN | TCP_ACK);
    assert_int_equal(g.ack, c->isn + 1);
    /* The MSS follows the netif's MTU (TCP_CALCULATE_EFF_SEND_MSS). */
    assert_int_equal(g.mss, MTU - (c->version == 4 ? 40 : 60));
    assert_int_equal(g.wscale, TCP_RCV_SCALE);
    c->rcv_nxt = g.seq + 1;
}

static void
spin(void)
{
    for (int i = 0; i < 8; i++)
        ev_run(F.loop, EVRUN_NOWAIT);
}

/* SYN, held, accepted; SYN-ACK; the client's ACK; established(), from the loop. */
static void
connect_client(struct client *c)
{
    send_syn(c, NULL, 0);
    assert_int_equal(c->syns, 1);
    assert_non_null(c->held);
    netstack_conn_accept(c->held, 30);
    take_synack(c);
    send_seg(c, TCP_ACK, NULL, 0);
    assert_int_equal(c->established, 0);
    spin();
    assert_int_equal(c->established, 1);
    assert_non_null(c->s);
}

/* Receives from lwIP: in-order payload into |buf| (if any), ACKing when
 * |ack|. Returns the bytes received. */
static size_t
recv_into(struct client *c, uint8_t *buf, size_t cap, int ack)
{
    struct seg g;
    size_t got = 0;
    uint32_t before = c->rcv_nxt;
    while (pop(c, &g)) {
        if (g.flags & TCP_RST)
            break;
        if (g.len == 0 || !g.next)
            continue;
        if (buf != NULL) {
            assert_true(got + g.len <= cap);
            memcpy(buf + got, g.data, g.len);
        }
        got += g.len;
    }
    if (ack && c->rcv_nxt != before)
        send_seg(c, TCP_ACK, NULL, 0);
    return got;
}

/* Checks that an advertised window of |got| bytes is |want|, to the
 * scale's granularity. */
static void
assert_window(uint32_t got, uint32_t want)
{
    if (got > want || got + (1u << TCP_RCV_SCALE) <= want)
        fail_msg("window %u, want %u", got, want);
}

/* ---- the layer above ----------------------------------------------------- */

static void
h_syn(void *ud, struct netstack_conn *nc, const struct ip_view *v)
{
    struct client *c = client_of(v); /* by the whole tuple */
    assert_ptr_equal(ud, &F);
    assert_non_null(c);
    assert_int_equal(v->tcp_flags & (TCP_SYN | TCP_ACK), TCP_SYN);
    c->syns++;
    c->held = nc;
    netstack_conn_set_arg(nc, c);
    if (c->accept_in_syn)
        netstack_conn_accept(nc, 30);
}

static void on_readable(void *arg);
static void on_drain(void *arg);

static void
h_established(void *arg, struct io_stream *s)
{
    struct client *c = arg;
    assert_false(F.in_input);
    c->established++;
    c->held = NULL;
    c->s = s;
    io_set_callbacks(s, on_readable, on_drain, c);
}

static void
h_gone(void *arg, const char *why)
{
    struct client *c = arg;
    assert_false(F.in_input);
    c->gone++;
    c->held = NULL;
    c->why = why;
}

static const struct netstack_handler handler = {
    .syn = h_syn, .established = h_established, .gone = h_gone, .ud = &F};

/* Reads all the stream holds into c->got. */
static void
read_all(struct client *c)
{
    ssize_t n;
    while ((n = io_read(c->s, c->got + c->got_len, sizeof(c->got) - c->got_len)) > 0)
        c->got_len += (size_t)n;
    if (n == 0)
        c->got_eof = 1;
    else
        assert_int_equal(errno, EAGAIN);
}

static void
on_readable(void *arg)
{
    struct client *c = arg;
    assert_false(F.in_input);
    c->readable++;
    if (c->read_in_cb)
        read_all(c);
    if (c->close_in_readable) {
        io_close(c->s, 0);
        c->s = NULL;
    }
}

/* Writes what is left of c->out; returns the bytes taken. */
static size_t
write_more(struct client *c)
{
    size_t left = c->out_len - c->out_off, half = left / 2;
    struct iovec iov[2] = {{(void *)(c->out + c->out_off), half},
                           {(void *)(c->out + c->out_off + half), left - half}};
    if (left == 0)
        return 0;
    ssize_t n = io_writev(c->s, iov, 2);
    if (n < 0) {
        assert_int_equal(errno, EAGAIN);
        return 0;
    }
    c->out_off += (size_t)n;
    return (size_t)n;
}

static void
on_drain(void *arg)
{
    struct client *c = arg;
    assert_false(F.in_input);
    c->drains++;
    if (c->close_in_drain) {
        io_close(c->s, 0);
        c->s = NULL;
        return;
    }
    if (c->out != NULL)
        while (write_more(c) > 0)
            continue;
}

/* Writes out[0..len) until the send buffer is full; returns the bytes taken. */
static size_t
fill_sndbuf(struct client *c, const uint8_t *out, size_t len)
{
    c->out = out;
    c->out_len = len;
    c->out_off = 0;
    while (write_more(c) > 0)
        continue;
    return c->out_off;
}

static struct netstack_stats
stats(void)
{
    struct netstack_stats st;
    netstack_stats(&st);
    return st;
}

static struct tcp_pcb *
find_pcb(struct tcp_pcb *list, const struct client *c)
{
    for (struct tcp_pcb *p = list; p != NULL; p = p->next)
        if (p->remote_port == c->sport && p->local_port == c->dport)
            return p;
    return NULL;
}

/* ---- fixture ------------------------------------------------------------- */

static size_t
memp_used(int i)
{
    return lwip_stats.memp[i]->used;
}

static int
setup(void **state)
{
    char err[256] = "";
    int sp[2], big = 1 << 20;

    log_threshold = LOG_LEVEL_WARN;
    memset(&q, 0, sizeof(q));
    nclients = 0;
    F.loop = ev_loop_new(EVFLAG_AUTO);
    assert_non_null(F.loop);
    assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp), 0);
    setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    setsockopt(sp[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    F.fd = sp[0];
    F.peer = sp[1];
    F.tun = tun_attach_fd(F.fd, F.tun_mtu ? F.tun_mtu : MTU, 64);
    assert_non_null(F.tun);
    assert_false(tun_offload(F.tun));
    if (netstack_init(F.loop, &handler, F.tun, MTU, err, sizeof(err)) != 0)
        fail_msg("netstack_init: %s", err);
    if (!F.based) { /* lwIP started in the first netstack_init */
        F.based = 1;
        F.heap_base = lwip_stats.mem.used;
        for (int i = 0; i < MEMP_MAX; i++)
            F.memp_base[i] = memp_used(i);
    }
    assert_int_equal(lwip_stats.mem.used, F.heap_base);
    netstack_conn_nocopy_mss(NETSTACK_NOCOPY_MSS);
    return 0;
}

/* A pcb lwIP keeps after chute let go of it must not point back at chute. */
static void
check_orphans(struct tcp_pcb *list)
{
    for (struct tcp_pcb *p = list; p != NULL; p = p->next) {
        assert_null(p->callback_arg);
        assert_null(p->errf);
        assert_null(p->sent);
        assert_true(p->recv == NULL || p->recv == tcp_recv_null);
    }
}

static int
teardown(void **state)
{
    struct tun_stats ts;

    for (size_t i = 0; i < nclients; i++)
        if (clients[i].s != NULL)
            io_close(clients[i].s, 1);
    netstack_fini();
    check_orphans(tcp_active_pcbs);
    check_orphans(tcp_tw_pcbs);
    while (tcp_active_pcbs != NULL)
        tcp_abort(tcp_active_pcbs); /* no netif now: the RST goes nowhere */
    while (tcp_tw_pcbs != NULL)
        tcp_abort(tcp_tw_pcbs);
    assert_null(tcp_listen_pcbs.listen_pcbs);
    assert_int_equal(lwip_stats.mem.used, F.heap_base);
    assert_int_equal(netstack_tx_bytes(), 0); /* no chunk outlives its connection */
    assert_int_equal(netstack_rx_bytes(), 0); /* nor a TUN buffer lwIP took */
    assert_int_equal(memp_used(MEMP_TCP_PCB), F.memp_base[MEMP_TCP_PCB]);
    assert_int_equal(memp_used(MEMP_TCP_PCB_LISTEN), F.memp_base[MEMP_TCP_PCB_LISTEN]);
    assert_int_equal(memp_used(MEMP_TCP_SEG), F.memp_base[MEMP_TCP_SEG]);
    assert_int_equal(memp_used(MEMP_PBUF), F.memp_base[MEMP_PBUF]);
    tun_stats(F.tun, &ts);
    assert_int_equal(ts.wq_drops, 0);
    tun_close(F.tun);
    close(F.fd);
    close(F.peer);
    ev_loop_destroy(F.loop);
    F.tun_mtu = 0;
    return 0;
}

/* The TUN takes packets of up to 64 KiB (as with offload); lwIP's MTU and
 * the client's MSS stay MTU. */
static int
setup_big_tun(void **state)
{
    F.tun_mtu = 65535;
    return setup(state);
}

/* ---- 1. the held SYN ----------------------------------------------------- */

/* A SYN reaches the layer above once, with its tuple, and nothing answers
 * it yet; a retransmission while it is held is counted, not passed on;
 * refusing with a RST answers RST|ACK for the SYN (RFC 9293 §3.10.7.1). */
static void
test_syn_held_then_refused_with_rst(void **state)
{
    struct client *c = new_client(4, 40000, 443);
    struct seg g;

    send_syn(c, NULL, 0);
    assert_int_equal(c->syns, 1);
    assert_non_null(c->held);
    assert_int_equal(q_untaken(), 0);
    assert_int_equal(stats().conns_active, 1);
    assert_int_equal(stats().conns_total, 1);

    send_syn(c, NULL, 0); /* the client retries */
    assert_int_equal(c->syns, 1);
    assert_int_equal(stats().syn_dups, 1);
    assert_int_equal(stats().conns_total, 1);
    assert_int_equal(q_untaken(), 0);

    netstack_conn_refuse(c->held, 1);
    assert_true(pop(c, &g)); /* pop matched it: from the SYN's destination to its source */
    assert_int_equal(g.flags, TCP_RST | TCP_ACK);
    assert_int_equal(g.seq, 0);
    assert_int_equal(g.ack, c->isn + 1);
    assert_int_equal(g.v.ttl, 64);
    assert_int_equal(q_untaken(), 0);
    assert_int_equal(stats().rst_sent, 1);
    assert_int_equal(stats().conns_active, 0);
    spin();
    assert_int_equal(c->gone + c->established, 0); /* refused: the caller knows */
}

/* Refusing without a RST sends nothing, and the tuple is free again. */
static void
test_syn_refused_silently(void **state)
{
    struct client *c = new_client(6, 40001, 80);

    send_syn(c, NULL, 0);
    assert_int_equal(c->syns, 1);
    netstack_conn_refuse(c->held, 0);
    assert_int_equal(q_untaken(), 0);
    assert_int_equal(stats().rst_sent, 0);
    assert_int_equal(stats().conns_active, 0);

    send_syn(c, NULL, 0); /* the retry is a new flow now */
    assert_int_equal(c->syns, 2);
    assert_int_equal(stats().syn_dups, 0);
    netstack_conn_refuse(c->held, 0);
}

/* A SYN longer than the netstack holds (it carries data: TFO) is dropped
 * and counted; the client retries without the data. */
static void
test_syn_with_data_dropped(void **state)
{
    struct client *c = new_client(4, 40002, 443);
    uint8_t data[100];

    fill_pat(data, 0, sizeof(data));
    send_syn(c, data, sizeof(data));
    assert_int_equal(c->syns, 0);
    assert_int_equal(stats().syn_dropped, 1);
    assert_int_equal(stats().conns_total, 0);
    assert_int_equal(q_untaken(), 0);

    send_syn(c, NULL, 0);
    assert_int_equal(c->syns, 1);
    netstack_conn_refuse(c->held, 0);
}

/* ---- 2. the handshake ---------------------------------------------------- */

/* accept answers SYN-ACK; the client's ACK hands the stream up from the
 * loop, not from inside netstack_tcp_input. */
static void
test_accept_then_established_from_loop(void **state)
{
    struct client *c = new_client(4, 40010, 8080);
    uint64_t fast;

    send_syn(c, NULL, 0);
    assert_int_equal(q_untaken(), 0);
    netstack_conn_accept(c->held, 30);
    take_synack(c);
    assert_int_equal(q_untaken(), 0);
    assert_int_equal(stats().listeners, 1);

    fast = stats().fast_path;
    send_seg(c, TCP_ACK, NULL, 0);
    assert_int_equal(stats().fast_path, fast + 1);
    assert_int_equal(c->established, 0);
    spin();
    assert_int_equal(c->established, 1);
    assert_int_equal(c->gone, 0);
    assert_non_null(c->s);
    assert_string_equal(c->s->ops->name, "lwip");
    assert_int_equal(io_splice_fd(c->s), -1);
    assert_true(io_can_peek(c->s));
    assert_int_equal(stats().conns_active, 1);
    /* lwIP's send buffer, as much as one write takes. */
    assert_int_equal(io_write_room(c->s), ROOM_MAX);
    spin();
    assert_int_equal(c->established, 1);
}

/* The layer above may accept from inside syn(); and a SYN retransmitted
 * during the handshake gets the SYN-ACK again (lwIP), not a second syn(). */
static void
test_accept_inside_syn_and_retransmitted_syn(void **state)
{
    struct client *c = new_client(4, 40011, 8080);
    struct seg g;

    c->accept_in_syn = 1;
    send_syn(c, NULL, 0);
    assert_int_equal(c->syns, 1);
    take_synack(c);
    uint32_t iss = c->rcv_nxt - 1;

    send_syn(c, NULL, 0);
    assert_int_equal(c->syns, 1);
    assert_int_equal(stats().syn_dups, 0); /* lwIP's now, not a held SYN */
    assert_true(pop(c, &g));
    assert_int_equal(g.flags, TCP_SYN | TCP_ACK);
    assert_int_equal(g.seq, iss);

    send_seg(c, TCP_ACK, NULL, 0);
    spin();
    assert_int_equal(c->established, 1);
}

/* No ACK within the timeout: gone("handshake timeout"), from the loop; an
 * ACK that comes later finds no owner and gets a RST. */
static void
test_handshake_timeout(void **state)
{
    struct client *c = new_client(4, 40012, 443);
    struct seg g;

    send_syn(c, NULL, 0);
    netstack_conn_accept(c->held, 0); /* due at the next loop iteration */
    take_synack(c);
    assert_int_equal(c->gone, 0);
    spin();
    assert_int_equal(c->gone, 1);
    assert_string_equal(c->why, "handshake timeout");
    assert_int_equal(c->established, 0);
    assert_int_equal(stats().conns_active, 0);

    send_seg(c, TCP_ACK, NULL, 0);
    assert_true(pop(c, &g));
    assert_true(g.flags & TCP_RST);
    assert_int_equal(g.seq, c->rcv_nxt);
    spin();
    assert_int_equal(c->established, 0);
    assert_int_equal(c->gone, 1);
}

/* The client resets after its ACK, before established() is delivered. */
static void
test_reset_during_handshake(void **state)
{
    struct client *c = new_client(4, 40013, 443);

    send_syn(c, NULL, 0);
    netstack_conn_accept(c->held, 30);
    take_synack(c);
    send_seg(c, TCP_ACK, NULL, 0);
    send_seg(c, TCP_RST, NULL, 0);
    assert_int_equal(c->gone + c->established, 0);
    spin();
    assert_int_equal(c->established, 0);
    assert_int_equal(c->gone, 1);
    assert_string_equal(c->why, "reset by client");
    assert_int_equal(stats().conns_active, 0);
    assert_int_equal(q_untaken(), 0);
}

/* The owner gives up after the client's ACK, before established() came
 * (its upstream failed): lwIP's pcb goes with a RST, and nothing calls
 * back into the freed connection. */
static void
test_refuse_after_accept(void **state)
{
    struct client *c = new_client(4, 40014, 443);
    struct seg g;

    send_syn(c, NULL, 0);
    netstack_conn_accept(c->held, 30);
    take_synack(c);
    send_seg(c, TCP_ACK, NULL, 0); /* accepted; established() is due */
    netstack_conn_refuse(c->held, 1);
    assert_true(pop(c, &g));
    assert_true(g.flags & TCP_RST);
    assert_int_equal(g.seq, c->rcv_nxt);
    assert_int_equal(stats().conns_active, 0);
    spin();
    assert_int_equal(c->gone + c->established, 0);
    send_data(c, "late", 4); /* no pcb, no conn: a RST */
    assert_true(pop(c, &g));
    assert_true(g.flags & TCP_RST);
    assert_int_equal(q_untaken(), 0);
}

/* ---- 3. the stream ------------------------------------------------------- */

/* Client bytes: on_readable once reading starts (never from read_start
 * itself), peek over the segments' pbufs, consume; lwIP's window counts
 * the bytes not consumed as taken, and consumed ones come back in the
 * next ACK. */
static void
test_read_peek_consume_window(void **state)
{
    struct client *c = new_client(4, 40020, 80);
    uint8_t data[5000], buf[4096];
    struct iovec iov[8];
    struct seg g;

    fill_pat(data, 0, sizeof(data));
    connect_client(c);
    send_data(c, data, 2000);
    send_data(c, data + 2000, 2000); /* lwIP acknowledges every second segment */
    assert_true(pop(c, &g));
    assert_int_equal(g.ack, c->isn + 1 + 4000);
    assert_int_equal(g.len, 0);
    assert_window(g.wnd, TCP_WND - 4000);
    spin();
    assert_int_equal(c->readable, 0); /* not reading yet */

    io_read_start(c->s);
    assert_int_equal(c->readable, 0); /* from the loop, not from read_start */
    spin();
    assert_int_equal(c->readable, 1); /* once: it only counted */

    assert_int_equal(io_peek(c->s, iov, 8), 2);
    assert_int_equal(iov[0].iov_len, 2000);
    assert_int_equal(iov[1].iov_len, 2000);
    check_pat(iov[0].iov_base, 0, 2000);
    check_pat(iov[1].iov_base, 2000, 2000);
    assert_int_equal(io_peek(c->s, iov, 1), 1);

    io_consume(c->s, 2500); /* across the first pbuf */
    assert_int_equal(io_peek(c->s, iov, 8), 1);
    assert_int_equal(iov[0].iov_len, 1500);
    check_pat(iov[0].iov_base, 2500, 1500);
    assert_int_equal(q_untaken(), 0); /* below the update threshold: no ACK of its own */

    send_data(c, data + 4000, 1000);
    tcp_fasttmr(); /* the delayed ACK */
    assert_true(pop(c, &g));
    assert_int_equal(g.ack, c->isn + 1 + 5000);
    /* Open again: the 2500 consumed; closed: the 1500 + 1000 not consumed. */
    assert_window(g.wnd, TCP_WND - 2500);
    spin();
    assert_int_equal(c->readable, 2);

    assert_int_equal(io_read(c->s, buf, sizeof(buf)), 1500);
    check_pat(buf, 2500, 1500);
    assert_int_equal(io_read(c->s, buf, sizeof(buf)), 1000);
    check_pat(buf, 4000, 1000);
    assert_int_equal(io_read(c->s, buf, sizeof(buf)), -1);
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(io_peek(c->s, iov, 8), -1);
    assert_int_equal(errno, EAGAIN);

    /* read_stop: bytes wait, on_readable does not come. */
    io_read_stop(c->s);
    send_data(c, data, 100);
    spin();
    assert_int_equal(c->readable, 2);
    io_read_start(c->s);
    spin();
    assert_int_equal(c->readable, 3);
}

/* The client's FIN: read returns the bytes, then 0, and again 0; the
 * stream still writes (half-close). */
static void
test_client_fin_reads_zero(void **state)
{
    struct client *c = new_client(4, 40021, 80);
    uint8_t buf[64];

    connect_client(c);
    c->read_in_cb = 1;
    io_read_start(c->s);
    send_seg(c, TCP_ACK | TCP_PSH | TCP_FIN, "abc", 3);
    spin();
    assert_true(c->readable >= 1);
    assert_int_equal(c->got_len, 3);
    assert_memory_equal(c->got, "abc", 3);
    assert_true(c->got_eof);
    assert_int_equal(io_read(c->s, buf, sizeof(buf)), 0);

    assert_int_equal(io_write(c->s, "xyz", 3), 3);
    assert_int_equal(recv_into(c, buf, sizeof(buf), 1), 3);
    assert_memory_equal(buf, "xyz", 3);
    assert_false(c->fin_in);
}

/* The client closes first: the ACK of its FIN waits for chute's FIN and
 * rides on it, one packet instead of two. Without a FIN from chute it
 * goes alone, after FIN_ACK_DELAY (40 ms). After chute's FIN, at once. */
static void
test_fin_ack_rides_on_fin(void **state)
{
    struct client *c = new_client(4, 40022, 80), *d = new_client(4, 40023, 80);
    struct client *e = new_client(4, 40024, 80);
    struct seg g;

    connect_client(c);
    send_seg(c, TCP_ACK | TCP_FIN, NULL, 0);
    spin();
    assert_int_equal(discard(c), 0); /* no bare ACK */
    assert_int_equal(io_shutdown(c->s), 0);
    assert_true(pop(c, &g));
    assert_int_equal(g.flags & (TCP_FIN | TCP_ACK), TCP_FIN | TCP_ACK);
    assert_int_equal(g.ack, c->snd_nxt); /* the client's FIN, acknowledged */
    assert_true(c->fin_in);
    assert_int_equal(discard(c), 0);
    send_seg(c, TCP_ACK, NULL, 0);
    io_close(c->s, 0);
    c->s = NULL;

    connect_client(d);
    send_seg(d, TCP_ACK | TCP_FIN, NULL, 0);
    ev_now_update(F.loop);
    ev_tstamp t0 = ev_now(F.loop);
    spin();
    assert_int_equal(discard(d), 0);
    for (int i = 0; i < 20 && !pop(d, &g); i++)
        ev_run(F.loop, EVRUN_ONCE); /* the delay's timer is the one due */
    ev_now_update(F.loop);
    assert_int_equal(g.flags, TCP_ACK);
    assert_int_equal(g.ack, d->snd_nxt);
    assert_true(ev_now(F.loop) - t0 >= 0.03);
    assert_true(ev_now(F.loop) - t0 < 1);
    assert_int_equal(discard(d), 0);
    assert_false(d->fin_in);
    io_close(d->s, 0);
    d->s = NULL;

    /* chute's FIN first: the client's FIN ends the connection, and its
     * ACK goes at once. */
    connect_client(e);
    assert_int_equal(io_shutdown(e->s), 0);
    assert_true(pop(e, &g));
    assert_true(e->fin_in);
    send_seg(e, TCP_ACK | TCP_FIN, NULL, 0);
    spin();
    assert_true(pop(e, &g));
    assert_int_equal(g.flags, TCP_ACK);
    assert_int_equal(g.ack, e->snd_nxt);
    io_close(e->s, 0);
    e->s = NULL;
}

/* writev takes what the send buffer has room for; on_drain comes after
 * the client's ACKs make room; every byte arrives in order. */
static void
test_write_partial_and_drain(void **state)
{
    struct client *c = new_client(4, 40030, 80);
    size_t total = 3 * TCP_SND_BUF + 12345, got = 0;
    uint8_t *out = malloc(total), *in = malloc(total);

    assert_non_null(out);
    assert_non_null(in);
    fill_pat(out, 0, total);
    connect_client(c);
    c->out = out;
    c->out_len = total;
    assert_int_equal(io_write_room(c->s), ROOM_MAX);
    assert_int_equal(write_more(c), ROOM_MAX); /* a partial take */
    while (write_more(c) > 0)
        continue;
    assert_int_equal(c->out_off, TCP_SND_BUF); /* the send buffer is full */
    assert_int_equal(io_write_room(c->s), 0);
    spin();
    assert_int_equal(c->drains, 0);

    for (int rounds = 0; got < total && rounds < 100000; rounds++) {
        got += recv_into(c, in + got, total - got, 1);
        spin();
    }
    assert_int_equal(got, total);
    check_pat(in, 0, total);
    assert_int_equal(c->out_off, total);
    assert_true(c->drains >= 3);
    assert_int_equal(q_untaken(), 0);
    free(out);
    free(in);
}

/* write_room 0 means on_drain comes: after the client acknowledges. */
static void
test_write_room_zero_then_drain(void **state)
{
    struct client *c = new_client(6, 40031, 80);
    uint8_t *out = malloc(TCP_SND_BUF + 1), buf[MTU * 4];
    struct seg g;

    assert_non_null(out);
    fill_pat(out, 0, TCP_SND_BUF + 1);
    connect_client(c);
    assert_int_equal(fill_sndbuf(c, out, TCP_SND_BUF + 1), TCP_SND_BUF);
    c->out = NULL; /* on_drain only counts */
    assert_int_equal(io_write_room(c->s), 0);
    assert_int_equal(io_write(c->s, out, 1), -1);
    assert_int_equal(errno, EAGAIN);
    spin();
    assert_int_equal(c->drains, 0);

    /* The first segment, acknowledged alone. */
    assert_true(pop(c, &g));
    assert_int_equal(g.len, MTU - 60);
    check_pat(g.data, 0, g.len);
    send_seg(c, TCP_ACK, NULL, 0);
    assert_int_equal(c->drains, 0);
    spin();
    assert_int_equal(c->drains, 1);
    assert_int_equal(io_write_room(c->s), MTU - 60);
    spin();
    assert_int_equal(c->drains, 1);
    recv_into(c, buf, sizeof(buf), 0);
    free(out);
}

/* shutdown: FIN after the bytes written; writes then fail with EPIPE. */
static void
test_shutdown_fin_after_data(void **state)
{
    struct client *c = new_client(4, 40032, 80);
    uint8_t data[5000], in[5000];
    size_t got = 0;

    fill_pat(data, 0, sizeof(data));
    connect_client(c);
    uint32_t iss = c->rcv_nxt - 1;
    assert_int_equal(io_write(c->s, data, sizeof(data)), sizeof(data));
    assert_int_equal(io_shutdown(c->s), 0);
    assert_int_equal(io_write(c->s, "x", 1), -1);
    assert_int_equal(errno, EPIPE);
    assert_int_equal(io_write_room(c->s), SIZE_MAX);
    for (int i = 0; i < 10 && !c->fin_in; i++)
        got += recv_into(c, in + got, sizeof(in) - got, 1);
    assert_true(c->fin_in);
    assert_false(c->rst_in);
    assert_int_equal(got, sizeof(data));
    check_pat(in, 0, got);
    assert_int_equal(c->rcv_nxt, iss + 1 + sizeof(data) + 1); /* the FIN after the bytes */

    /* Half-closed: the client still sends, and its bytes come up. */
    c->read_in_cb = 1;
    io_read_start(c->s);
    send_seg(c, TCP_ACK | TCP_PSH, "ok", 2);
    spin();
    assert_int_equal(c->got_len, 2);
    assert_false(c->got_eof);
    io_close(c->s, 0);
    c->s = NULL;
}

/* close(0): the stream is gone at once; lwIP sends what was written, then
 * FIN, on its own. */
static void
test_close_graceful(void **state)
{
    struct client *c = new_client(4, 40033, 80);
    uint8_t data[20000], in[20000];
    size_t got = 0;

    fill_pat(data, 0, sizeof(data));
    connect_client(c);
    assert_int_equal(io_write(c->s, data, sizeof(data)), sizeof(data));
    io_close(c->s, 0);
    c->s = NULL;
    assert_int_equal(stats().conns_active, 0);
    for (int i = 0; i < 50 && !c->fin_in; i++)
        got += recv_into(c, in + got, sizeof(in) - got, 1);
    assert_true(c->fin_in);
    assert_false(c->rst_in);
    assert_int_equal(got, sizeof(data));
    check_pat(in, 0, got);
    send_seg(c, TCP_ACK | TCP_FIN, NULL, 0); /* lwIP: TIME_WAIT, chute's no longer */
    spin();
    assert_int_equal(c->readable + c->drains + c->gone, 0);
}

/* close(1): a RST, and no FIN. */
static void
test_close_reset(void **state)
{
    struct client *c = new_client(4, 40034, 80);
    uint8_t data[3000];

    fill_pat(data, 0, sizeof(data));
    connect_client(c);
    assert_int_equal(io_write(c->s, data, sizeof(data)), sizeof(data));
    flush_out();
    uint32_t next = c->rcv_nxt + sizeof(data);
    io_close(c->s, 1);
    c->s = NULL;
    recv_into(c, NULL, 0, 0);
    assert_true(c->rst_in);
    assert_false(c->fin_in);
    assert_int_equal(c->rcv_nxt, next); /* the data, then the RST */
    assert_int_equal(stats().conns_active, 0);
}

/* A client RST: the owner hears it from the loop (on_readable, on_drain)
 * and the next read and write fail with ECONNRESET. */
static void
test_client_reset_fails_read_and_write(void **state)
{
    struct client *c = new_client(4, 40035, 80);
    uint8_t *out = malloc(2 * TCP_SND_BUF), buf[16];
    struct iovec iov[1];

    assert_non_null(out);
    fill_pat(out, 0, 2 * TCP_SND_BUF);
    connect_client(c);
    io_read_start(c->s);
    assert_int_equal(fill_sndbuf(c, out, 2 * TCP_SND_BUF), TCP_SND_BUF); /* wants on_drain */
    c->out = NULL;
    discard(c);
    send_seg(c, TCP_RST, NULL, 0);
    assert_int_equal(c->readable + c->drains, 0);
    spin();
    assert_int_equal(c->readable, 1);
    assert_int_equal(c->drains, 1);
    assert_int_equal(io_read(c->s, buf, sizeof(buf)), -1);
    assert_int_equal(errno, ECONNRESET);
    assert_int_equal(io_peek(c->s, iov, 1), -1);
    assert_int_equal(errno, ECONNRESET);
    assert_int_equal(io_write(c->s, "x", 1), -1);
    assert_int_equal(errno, ECONNRESET);
    assert_int_equal(io_shutdown(c->s), -1);
    assert_int_equal(errno, ECONNRESET);
    assert_int_equal(io_write_room(c->s), SIZE_MAX);
    io_close(c->s, 0);
    c->s = NULL;
    assert_int_equal(q_untaken(), 0);
    assert_int_equal(stats().conns_active, 0);
    free(out);
}

/* One IPv6 connection through: SYN-ACK with the v6 MSS, bytes both ways,
 * the ends. */
static void
test_ipv6_connection(void **state)
{
    struct client *c = new_client(6, 40040, 443);
    uint8_t buf[64];

    c->accept_in_syn = 1;
    send_syn(c, NULL, 0);
    take_synack(c);
    send_seg(c, TCP_ACK, NULL, 0);
    spin();
    assert_int_equal(c->established, 1);

    c->read_in_cb = 1;
    io_read_start(c->s);
    send_data(c, "hello", 5);
    spin();
    assert_int_equal(c->got_len, 5);
    assert_memory_equal(c->got, "hello", 5);
    assert_int_equal(io_write(c->s, "world", 5), 5);
    assert_int_equal(recv_into(c, buf, sizeof(buf), 1), 5);
    assert_memory_equal(buf, "world", 5);

    send_seg(c, TCP_ACK | TCP_FIN, NULL, 0);
    spin();
    assert_true(c->got_eof);
    io_close(c->s, 0);
    c->s = NULL;
    recv_into(c, NULL, 0, 1);
    assert_true(c->fin_in);
    assert_false(c->rst_in);
}

/* ---- 4. closing from the owner's callbacks ------------------------------- */

/* on_readable reads, then closes the stream: nothing of the connection is
 * touched after (ASan), and lwIP FINs the client. */
static void
test_close_inside_readable(void **state)
{
    struct client *c = new_client(4, 40050, 80);

    connect_client(c);
    c->read_in_cb = 1;
    c->close_in_readable = 1;
    io_read_start(c->s);
    send_data(c, "bye", 3);
    spin();
    assert_int_equal(c->readable, 1);
    assert_int_equal(c->got_len, 3);
    assert_null(c->s);
    assert_int_equal(stats().conns_active, 0);
    recv_into(c, NULL, 0, 1);
    assert_true(c->fin_in);
    assert_false(c->rst_in);
}

/* on_drain closes the stream: lwIP finishes what was written, then FINs. */
static void
test_close_inside_drain(void **state)
{
    struct client *c = new_client(4, 40051, 80);
    uint8_t *out = malloc(TCP_SND_BUF + 1), *in = malloc(TCP_SND_BUF);
    size_t got = 0;

    assert_non_null(out);
    assert_non_null(in);
    fill_pat(out, 0, TCP_SND_BUF + 1);
    connect_client(c);
    c->close_in_drain = 1;
    assert_int_equal(fill_sndbuf(c, out, TCP_SND_BUF + 1), TCP_SND_BUF);
    assert_int_equal(io_write_room(c->s), 0);
    for (int i = 0; i < 100000 && !c->fin_in && !c->rst_in; i++) {
        got += recv_into(c, in + got, TCP_SND_BUF - got, 1);
        spin();
    }
    assert_int_equal(c->drains, 1);
    assert_null(c->s);
    assert_true(c->fin_in);
    assert_false(c->rst_in);
    assert_int_equal(got, TCP_SND_BUF);
    check_pat(in, 0, got);
    assert_int_equal(stats().conns_active, 0);
    free(out);
    free(in);
}

/* ---- 5. the heap cap ----------------------------------------------------- */

/* Connects clients and sends each a window's worth of bytes nobody reads,
 * until lwIP's heap holds more than NETSTACK_MEM_HIGH. Returns how many. */
static size_t
fill_heap(uint16_t port0)
{
    static uint8_t seg[FILL_SEG];
    size_t per = TCP_WND / FILL_SEG, n = 0;

    assert_true(per >= 1);
    fill_pat(seg, 0, sizeof(seg));
    while (lwip_stats.mem.used <= NETSTACK_MEM_HIGH) {
        struct client *c = new_client(4, (uint16_t)(port0 + n++), 80);
        connect_client(c);
        for (size_t k = 0; k < per; k++)
            send_data(c, seg, sizeof(seg));
        tcp_fasttmr(); /* every ACK out now */
        discard(c);
    }
    return n;
}

/* Above NETSTACK_MEM_HIGH every connection holds back window updates and
 * takes no writes (write_room 0, counted once as a pause); netstack_poll
 * below NETSTACK_MEM_LOW gives the windows back and on_drain follows. */
static void
test_heap_cap_pauses_and_resumes(void **state)
{
    struct client *w = new_client(4, 41000, 80);
    struct seg g;
    size_t n, i;

    connect_client(w);
    n = fill_heap(41001);
    assert_true(lwip_stats.mem.used > NETSTACK_MEM_HIGH);
    assert_true(lwip_stats.mem.used < MEM_SIZE);
    assert_int_equal(stats().mem_pauses, 0); /* nobody asked yet */
    assert_int_equal(stats().heap_used, lwip_stats.mem.used);
    assert_int_equal(stats().heap_size, MEM_SIZE);

    assert_int_equal(io_write_room(w->s), 0);
    assert_int_equal(stats().mem_pauses, 1);
    assert_int_equal(io_write(w->s, "x", 1), -1);
    assert_int_equal(errno, EAGAIN);

    /* Consume until the heap is below LOW: no window update leaves. */
    for (i = 0; i < n && lwip_stats.mem.used >= NETSTACK_MEM_LOW; i++) {
        struct client *c = &clients[1 + i];
        struct iovec iov[64];
        int k;
        while ((k = io_peek(c->s, iov, 64)) > 0) {
            size_t len = 0;
            for (int j = 0; j < k; j++)
                len += iov[j].iov_len;
            io_consume(c->s, len);
        }
        assert_int_equal(errno, EAGAIN);
    }
    assert_true(i < n); /* some are still full */
    assert_true(lwip_stats.mem.used < NETSTACK_MEM_LOW);
    tcp_fasttmr();
    assert_int_equal(q_untaken(), 0);
    assert_int_equal(stats().mem_pauses, 1);
    assert_int_equal(io_write_room(w->s), 0); /* still paused: until netstack_poll */
    spin();
    assert_int_equal(w->drains, 0);

    /* The windows come back in tcp_recved's u16 steps, an update sent
     * whenever the right edge moved by TCP_WND_UPDATE_THRESHOLD: what is
     * left below that rides on the next segment. */
    netstack_poll();
    for (size_t j = 0; j < i; j++) {
        struct client *c = &clients[1 + j];
        uint32_t before = c->wnd;
        int updates = 0;
        while (pop(c, &g)) {
            assert_int_equal(g.len, 0);
            updates++;
        }
        assert_true(updates >= 1);
        assert_true(c->wnd > before);
        assert_true(c->wnd + TCP_WND_UPDATE_THRESHOLD >= TCP_WND);
    }
    assert_int_equal(w->drains, 0);
    spin();
    assert_int_equal(w->drains, 1);
    assert_true(io_write_room(w->s) > 0);
    assert_int_equal(io_write(w->s, "x", 1), 1);
    assert_int_equal(stats().mem_pauses, 1);
}

/* A heap full of out-of-order segments gives them back for the segment
 * that fills their hole: else every flow with a hole holds its share of
 * the heap for good, and the retransmission that would free it is dropped
 * (1,000 uploads without offload moved 0.05 Gbit/s). */
static void
test_full_heap_frees_out_of_order(void **state)
{
    static uint8_t seg[1400];
    struct client *c = new_client(4, 43000, 80);
    struct netstack_limits l = {.heap = 256 << 10};
    struct iovec iov[64];
    size_t k, got = 0;

    connect_client(c);
    netstack_set_limits(&l);
    netstack_limits_apply(); /* the cap; pools in use are left as they are */
    assert_int_equal(netstack_heap_cap(), l.heap);
    fill_pat(seg, 0, sizeof(seg));
    uint32_t hole = c->snd_nxt;
    uint64_t drops = stats().rx_drops;
    /* Out-of-order segments 1,000 bytes past the hole until one is dropped
     * (the first refusal of the batch already lets go of the queue once). */
    for (k = 0; stats().rx_drops == drops && k < 1000; k++)
        inject(build(inbuf, c, TCP_ACK, hole + 1000 + (uint32_t)(k * sizeof(seg)), c->rcv_nxt, NULL,
                     0, seg, sizeof(seg)));
    assert_true(k < 1000);
    assert_non_null(((struct tcp_pcb *)tcp_active_pcbs)->ooseq);
    netstack_flush(); /* the batch ends */

    uint64_t freed = stats().ooseq_freed;
    drops = stats().rx_drops;
    inject(build(inbuf, c, TCP_ACK | TCP_PSH, hole, c->rcv_nxt, NULL, 0, seg, 1000));
    assert_int_equal(stats().rx_drops, drops); /* the hole's segment was taken */
    assert_true(stats().ooseq_freed > freed);
    int n = io_peek(c->s, iov, 64);
    for (int j = 0; j < n; j++)
        got += iov[j].iov_len;
    assert_int_equal(got, 1000);
    assert_memory_equal(iov[0].iov_base, seg, iov[0].iov_len);
    io_consume(c->s, got);

    netstack_set_limits(NULL);
    netstack_limits_apply();
}

/* A graceful close while the cap holds back the window of bytes the owner
 * consumed: lwIP sends RST instead of FIN when the application did not
 * give back all it received (tcp_close), and drops what is unsent. The
 * client must still get every byte written, then FIN. */
static void
test_close_under_heap_cap_still_fins(void **state)
{
    struct client *c = new_client(4, 42000, 80);
    uint8_t req[100], data[20000], in[20000], buf[sizeof(req)];
    size_t got = 0;

    fill_pat(req, 0, sizeof(req));
    fill_pat(data, 0, sizeof(data));
    connect_client(c);
    send_data(c, req, sizeof(req));
    assert_int_equal(io_write(c->s, data, sizeof(data)), sizeof(data));
    flush_out(); /* the first segments leave; the rest waits for the client's ACKs */
    fill_heap(42001);
    assert_int_equal(io_read(c->s, buf, sizeof(buf)), sizeof(req)); /* window held back */
    assert_int_equal(stats().mem_pauses, 1);
    io_close(c->s, 0);
    c->s = NULL;
    for (int i = 0; i < 50 && !c->fin_in && !c->rst_in; i++)
        got += recv_into(c, in + got, sizeof(in) - got, 1);
    assert_false(c->rst_in);
    assert_true(c->fin_in);
    assert_int_equal(got, sizeof(data));
    check_pat(in, 0, got);
}

/* Both ends sent FIN, chute's first (shutdown), so lwIP holds the pcb in
 * TIME_WAIT, and frees it 2 MSL later without a callback. A stream still
 * open then (its owner has not read the end yet) must not touch that pcb:
 * lwIP's pool hands it to the next connection. */
static void
test_time_wait_expiry_under_open_stream(void **state)
{
    struct client *a = new_client(4, 40061, 80), *b = new_client(4, 40062, 80);
    struct tcp_pcb *tw;

    connect_client(a);
    assert_int_equal(io_shutdown(a->s), 0);
    recv_into(a, NULL, 0, 0);
    assert_true(a->fin_in);
    send_seg(a, TCP_ACK | TCP_FIN, NULL, 0);
    recv_into(a, NULL, 0, 0);
    tw = find_pcb(tcp_tw_pcbs, a);
    assert_non_null(tw);
    for (int i = 0; i < 4 * (int)(2 * TCP_MSL / TCP_SLOW_INTERVAL) && tcp_tw_pcbs != NULL; i++)
        tcp_tmr();
    assert_null(tcp_tw_pcbs);

    connect_client(b);
    assert_ptr_equal(find_pcb(tcp_active_pcbs, b), tw); /* the case at hand: reused */
    io_close(a->s, 0);
    a->s = NULL;

    /* b is untouched: no FIN or RST, and its bytes still come up. */
    assert_int_equal(discard(b), 0);
    b->read_in_cb = 1;
    io_read_start(b->s);
    send_data(b, "ping", 4);
    spin();
    assert_int_equal(b->got_len, 4);
    assert_int_equal(discard(b), 0);
    assert_false(b->fin_in || b->rst_in);
}

/* The client's FIN first, then the owner's shutdown (before it read the
 * end: it was not reading), then the client's last ACK: lwIP closes the pcb
 * with ERR_CLSD. That is a clean end: the owner reads its bytes, then 0. */
static void
test_clean_end_is_not_a_reset(void **state)
{
    struct client *c = new_client(4, 40063, 80);
    uint8_t buf[16];

    connect_client(c);
    send_seg(c, TCP_ACK | TCP_PSH | TCP_FIN, "last", 4);
    recv_into(c, NULL, 0, 0); /* lwIP's ACK */
    assert_int_equal(io_shutdown(c->s), 0);
    recv_into(c, NULL, 0, 1); /* the FIN, acknowledged: the pcb is closed */
    assert_true(c->fin_in);
    assert_null(find_pcb(tcp_active_pcbs, c));

    c->read_in_cb = 1;
    io_read_start(c->s);
    spin();
    assert_int_equal(c->got_len, 4);
    assert_memory_equal(c->got, "last", 4);
    assert_true(c->got_eof);
    assert_int_equal(io_read(c->s, buf, sizeof(buf)), 0);
    assert_int_equal(io_write(c->s, "x", 1), -1);
    assert_int_equal(errno, EPIPE);
}

/* ---- 6. TIME_WAIT reuse -------------------------------------------------- */

/* lwIP closed first and holds the 4-tuple in TIME_WAIT; the client's new
 * SYN on it is a new connection, accepted. */
static void
test_time_wait_reused(void **state)
{
    struct client *c = new_client(4, 40060, 80);

    connect_client(c);
    io_close(c->s, 0);
    c->s = NULL;
    recv_into(c, NULL, 0, 0);
    assert_true(c->fin_in);
    send_seg(c, TCP_ACK | TCP_FIN, NULL, 0);
    recv_into(c, NULL, 0, 0); /* lwIP's ACK of the FIN */
    assert_non_null(find_pcb(tcp_tw_pcbs, c));
    assert_null(find_pcb(tcp_active_pcbs, c));

    c->isn += 1000000; /* the client's next connection on the same port */
    c->syns = c->established = 0;
    c->fin_in = 0;
    connect_client(c);
    assert_int_equal(stats().tw_reused, 1);
    assert_null(find_pcb(tcp_tw_pcbs, c));
    c->read_in_cb = 1;
    io_read_start(c->s);
    send_data(c, "again", 5);
    spin();
    assert_int_equal(c->got_len, 5);
}

/* ---- lwIP's globals ------------------------------------------------------ */

/* One netstack at a time, and lwip_init once per process: a second
 * netstack_init (after a netstack_fini) must not rebuild the heap under
 * what lwIP still holds. */
static void
test_init_once(void **state)
{
    char err[256] = "";
    void *live, *next;

    assert_int_equal(netstack_init(F.loop, &handler, F.tun, MTU, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "in use"));

    live = mem_malloc(64); /* the heap's first block: it starts empty */
    assert_non_null(live);
    size_t used = lwip_stats.mem.used;
    netstack_fini();
    assert_int_equal(netstack_init(F.loop, &handler, F.tun, MTU, err, sizeof(err)), 0);
    assert_int_equal(lwip_stats.mem.used, used);
    next = mem_malloc(64);
    assert_non_null(next);
    assert_ptr_not_equal(next, live); /* a fresh heap would hand out the first block again */
    mem_free(next);
    mem_free(live);

    /* And the netstack works after the restart. */
    struct client *c = new_client(4, 40070, 80);
    connect_client(c);
}

/* Each test with its own netstack. */
/* ---- no-copy writes (txbuf.c) ------------------------------------------- */

/* Puts the pattern from |off| into what io_write_buf offers (at most
 * |want|) and commits it; returns the bytes committed (0: nothing offered). */
static size_t
write_nocopy(struct client *c, size_t off, size_t want)
{
    size_t len = want;
    uint8_t *at = io_write_buf(c->s, &len);
    if (at == NULL)
        return 0;
    assert_true(len > 0 && len <= want);
    fill_pat(at, off, len);
    assert_int_equal(io_write_commit(c->s, len), (ssize_t)len);
    return len;
}

/* Takes every segment lwIP sent so far as lost: the client sees none. */
static void
lose_all(void)
{
    flush_out();
    for (size_t i = 0; i < q.n; i++)
        q.taken[i] = 1;
}

/* A connection with 20000 bytes of the pattern written, not yet read: one
 * large write, so the stream is a download until all is acknowledged. */
static struct client *
download_client(uint16_t sport)
{
    struct client *c = new_client(4, sport, 80);
    uint8_t out[20000];

    netstack_conn_nocopy_mss(0); /* as with offload; setup puts it back */
    connect_client(c);
    size_t len = 4096;
    assert_null(io_write_buf(c->s, &len)); /* nothing large yet: copies */
    fill_pat(out, 0, sizeof(out));
    assert_int_equal(io_write(c->s, out, sizeof(out)), (ssize_t)sizeof(out));
    return c;
}

/* Writes |want| bytes into a chunk, lets the client take and acknowledge
 * them, and checks that nothing is held once all is acknowledged. */
static size_t
resume_nocopy(struct client *c, size_t want)
{
    size_t len = want;
    uint8_t *at = io_write_buf(c->s, &len);
    assert_non_null(at);
    memset(at, 0x5A, len);
    assert_int_equal(io_write_commit(c->s, len), (ssize_t)len);
    flush_out();
    assert_int_equal(recv_into(c, NULL, 0, 1), len);
    spin();
    flush_out();
    flush_out();
    assert_int_equal(netstack_heap_used(), F.heap_base);
    return len;
}

/* After a large write the next bytes go into chunks lwIP sends from: they
 * arrive intact, once all is acknowledged the open connection holds no
 * chunk (the heap is where it started), and after that pause the next
 * bytes go into a chunk again. */
static void
test_nocopy_download(void **state)
{
    size_t total = 400000, off = 20000, got = 0;
    uint8_t *in = malloc(total);

    assert_non_null(in);
    struct client *c = download_client(40090);
    uint64_t nocopy0 = stats().tx_nocopy;
    for (int rounds = 0; got < total && rounds < 10000; rounds++) {
        if (off < total)
            off += write_nocopy(c, off, total - off);
        got += recv_into(c, in + got, total - got, 1);
        spin();
    }
    assert_int_equal(got, total);
    check_pat(in, 0, total);
    assert_int_equal(stats().tx_nocopy - nocopy0, total - 20000);
    flush_out();
    flush_out(); /* chunks let go while the queue held packets: freed now */
    assert_int_equal(netstack_heap_used(), F.heap_base);
    /* All acknowledged, the download paused: it goes on in chunks at once
     * (copying the first write after each pause was 4% of a GiB). */
    assert_int_equal(resume_nocopy(c, 20000), 20000);
    assert_int_equal(stats().tx_nocopy - nocopy0, total);
    /* An empty offer given back (the read found nothing) is freed at once. */
    size_t len = 4096;
    assert_non_null(io_write_buf(c->s, &len));
    assert_true(netstack_heap_used() > F.heap_base);
    assert_int_equal(io_write_commit(c->s, 0), 0);
    assert_int_equal(netstack_heap_used(), F.heap_base);
    /* Resumed with a trickle: a download no more, copies until a large write. */
    assert_int_equal(resume_nocopy(c, 1000), 1000);
    len = 4096;
    assert_null(io_write_buf(c->s, &len));
    free(in);
}

/* close(0) with chunk bytes lost on the way: lwIP retransmits them from
 * the chunks after the stream is gone, then FIN; the chunks go with the
 * last ACK and the pcb no longer points at chute. */
static void
test_nocopy_close_then_retransmit(void **state)
{
    size_t want = 50000, off = 20000, got = 0;
    uint8_t *in = malloc(want);

    assert_non_null(in);
    struct client *c = download_client(40091);
    while (off < want) {
        size_t n = write_nocopy(c, off, want - off);
        assert_true(n > 0);
        off += n;
    }
    lose_all();
    io_close(c->s, 0);
    c->s = NULL;
    assert_int_equal(stats().conns_active, 0);
    /* Chunks let go too early would be reused here (read as 0xAA below;
     * ASan says use-after-free). */
    void *reuse[4];
    for (int i = 0; i < 4; i++) {
        reuse[i] = malloc(65536);
        assert_non_null(reuse[i]);
        memset(reuse[i], 0xAA, 65536);
    }
    for (int i = 0; i < 200 && !c->fin_in; i++) {
        tcp_tmr(); /* the retransmission timer */
        got += recv_into(c, in + got, want - got, 1);
    }
    assert_true(c->fin_in);
    assert_false(c->rst_in);
    assert_int_equal(got, want);
    check_pat(in, 0, got);
    for (int i = 0; i < 4; i++)
        free(reuse[i]);
    send_seg(c, TCP_ACK | TCP_FIN, NULL, 0);
    flush_out();
    flush_out();
    assert_int_equal(netstack_heap_used(), F.heap_base);
    free(in);
}

/* A client RST while chunk bytes are in flight, the stream open or
 * already closed: lwIP drops its segments and chute the chunks. */
static void
test_nocopy_reset_drops_chunks(void **state)
{
    uint8_t b[8];
    for (int closed = 0; closed < 2; closed++) {
        struct client *c = download_client((uint16_t)(40092 + closed));
        assert_true(write_nocopy(c, 20000, 30000) > 0);
        lose_all();
        if (closed) {
            io_close(c->s, 0);
            c->s = NULL;
        }
        assert_true(netstack_heap_used() > F.heap_base);
        send_seg(c, TCP_RST, NULL, 0);
        spin();
        if (!closed) {
            assert_int_equal(io_read(c->s, b, sizeof(b)), -1);
            assert_int_equal(errno, ECONNRESET);
            io_close(c->s, 0);
            c->s = NULL;
        }
        flush_out();
        flush_out();
        assert_int_equal(netstack_heap_used(), F.heap_base);
    }
}

/* The netstack stops while a closed connection's pcb still sends from its
 * chunks: the teardown finds no pcb pointing at chute and every chunk
 * freed (netstack_fini aborts it). */
static void
test_nocopy_linger_at_fini(void **state)
{
    struct client *c = download_client(40094);
    assert_true(write_nocopy(c, 20000, 30000) > 0);
    lose_all();
    io_close(c->s, 0);
    c->s = NULL;
    assert_true(netstack_tx_bytes() > 0); /* lingering, unacknowledged */
}

/* The engine's data path for what the client sends: into the TUN, read
 * back as a batch, each packet parsed and handed to lwIP where it lies. */
static const uint8_t *
send_via_tun(struct client *c, const void *data, size_t len)
{
    struct tun_batch b;
    struct ip_view v;
    size_t n = build(inbuf, c, TCP_ACK | TCP_PSH, c->snd_nxt, c->rcv_nxt, NULL, 0, data, len);
    assert_int_equal(send(F.peer, inbuf, n, 0), (ssize_t)n);
    c->snd_nxt += (uint32_t)len;
    assert_int_equal(tun_read_batch(F.tun, &b), 1);
    assert_int_equal(ip_view_parse(&v, b.data[0], b.len[0]), IP_OK);
    F.in_input = 1;
    netstack_tcp_input(&v);
    F.in_input = 0;
    return b.data[0];
}

/* An offloaded packet's bytes stay where the TUN read them: lwIP's pbuf is
 * that buffer, the relay reads it intact, and once read it is off the heap
 * cap and back with the device. A packet of an MTU's size is copied, as
 * before. */
static void
test_rx_nocopy_upload(void **state)
{
    static uint8_t data[70000], buf[40000];
    struct client *c = new_client(4, 40095, 80);
    connect_client(c);
    fill_pat(data, 0, sizeof(data));
    uint64_t nocopy0 = stats().rx_nocopy;

    const uint8_t *first = send_via_tun(c, data, 30000);
    assert_int_equal(stats().rx_nocopy - nocopy0, 30000);
    assert_true(netstack_rx_bytes() >= 30000); /* held whole, under the heap cap */
    assert_true(netstack_heap_used() >= F.heap_base + netstack_rx_bytes());
    /* Read where the first was: a device that had kept that buffer would
     * overwrite what lwIP holds (check_pat below). */
    send_via_tun(c, data + 30000, 1000); /* small: copied */
    assert_int_equal(stats().rx_nocopy - nocopy0, 30000);

    spin();
    size_t got = 0;
    ssize_t n;
    while ((n = io_read(c->s, buf + got, sizeof(buf) - got)) > 0)
        got += (size_t)n;
    assert_int_equal(got, 31000);
    check_pat(buf, 0, 31000);
    assert_int_equal(netstack_rx_bytes(), 0);
    assert_int_equal(netstack_heap_used(), F.heap_base);

    /* Read into a new buffer: the next packet arrives as intact. */
    send_via_tun(c, data + 31000, 9000);
    spin();
    assert_int_equal(io_read(c->s, buf, sizeof(buf)), 9000);
    check_pat(buf, 31000, 9000);

    /* The first packet's buffer went back to the device, which reads into
     * it again once the next large packet is taken. */
    send_via_tun(c, data + 40000, 20000);
    assert_ptr_equal(send_via_tun(c, data + 60000, 100), first);
    spin();
    for (got = 0; (n = io_read(c->s, buf + got, sizeof(buf) - got)) > 0;)
        got += (size_t)n;
    assert_int_equal(got, 20100);
    check_pat(buf, 40000, 20100);
}

/* A packet that is not the last batch's (the SYN chute keeps, a test's
 * buffer) is not the TUN's to give: tun_take says no and it is copied. */
static void
test_rx_take_only_batch_packets(void **state)
{
    struct tun_slot sl;
    uint8_t other[64] = {0};
    assert_int_equal(tun_take(F.tun, other + 16, SIZE_MAX, &sl), -1);
    struct client *c = new_client(4, 40096, 80);
    connect_client(c);
    static uint8_t data[20000];
    size_t n = build(inbuf, c, TCP_ACK | TCP_PSH, c->snd_nxt, c->rcv_nxt, NULL, 0, data, sizeof(data));
    assert_int_equal(send(F.peer, inbuf, n, 0), (ssize_t)n);
    struct tun_batch b;
    assert_int_equal(tun_read_batch(F.tun, &b), 1);
    assert_int_equal(tun_take(F.tun, b.data[0], 1000, &sl), -1); /* over the budget */
    assert_int_equal(tun_take(F.tun, b.data[0], SIZE_MAX, &sl), 0);
    assert_true(sl.size > n && (uint8_t *)sl.spare + TUN_SLOT_SPARE == (uint8_t *)sl.base + sl.size);
    assert_int_equal(tun_take(F.tun, b.data[0], SIZE_MAX, &sl), -1); /* taken already */
    free(sl.base);
}

#define T(test) cmocka_unit_test_setup_teardown(test, setup, teardown)
#define T_BIG(test) cmocka_unit_test_setup_teardown(test, setup_big_tun, teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_syn_held_then_refused_with_rst),
        T(test_syn_refused_silently),
        T(test_syn_with_data_dropped),
        T(test_accept_then_established_from_loop),
        T(test_accept_inside_syn_and_retransmitted_syn),
        T(test_handshake_timeout),
        T(test_reset_during_handshake),
        T(test_refuse_after_accept),
        T(test_read_peek_consume_window),
        T(test_client_fin_reads_zero),
        T(test_fin_ack_rides_on_fin),
        T(test_write_partial_and_drain),
        T(test_write_room_zero_then_drain),
        T(test_shutdown_fin_after_data),
        T(test_close_graceful),
        T(test_close_reset),
        T(test_client_reset_fails_read_and_write),
        T(test_ipv6_connection),
        T(test_close_inside_readable),
        T(test_close_inside_drain),
        T(test_heap_cap_pauses_and_resumes),
        T(test_close_under_heap_cap_still_fins),
        T(test_full_heap_frees_out_of_order),
        T(test_time_wait_expiry_under_open_stream),
        T(test_clean_end_is_not_a_reset),
        T(test_time_wait_reused),
        T(test_nocopy_download),
        T(test_nocopy_close_then_retransmit),
        T(test_nocopy_reset_drops_chunks),
        T(test_nocopy_linger_at_fini),
        T_BIG(test_rx_nocopy_upload),
        T_BIG(test_rx_take_only_batch_packets),
        T(test_init_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
