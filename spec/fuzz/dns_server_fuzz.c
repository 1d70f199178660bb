/* libFuzzer target for the DNS server's query path (dns_server_query in
 * core/dns/server.c): what TUN clients and the listener ask, answered with
 * fake IPs, chute.on_dns decisions, errors, or through the resolver from
 * an upstream whose answers come from the input too.
 *
 * Each input gets a resolver and a server of its own: fake-ip (a /28, so
 * addresses are recycled within an input, and a v6 range; two excluded
 * names) or real-ip, with or without a hook and a cache. The resolver's
 * one upstream is a UDP socket of this harness on 127.0.0.1 (the TCP port
 * of the same number is bound, never listened on: a truncated answer's
 * TCP retry is refused at once); no packet leaves loopback.
 *
 * Input: [config][records...], a record being [kind][length BE16][bytes]:
 *   kind & 3 == 0  a query over UDP, 1 over TCP; kind >> 2 picks |max|
 *   kind & 3 == 2  an upstream answer to a query chute sent (the oldest,
 *                  or with bit 3 the newest), its ID made the query's;
 *                  3 the same with the query's question put in, so it
 *                  matches. Bit 2 keeps a TC bit (else cleared).
 * The loop turns after every record, so answers are delivered.
 *
 * Invariants: a query gets at most one answer, none when it is a response
 * or has no header, with its ID and QR, within what the transport and the
 * asker's EDNS0 size allow. An answer chute makes itself comes at once,
 * exactly when it must (FORMERR, NOTIMP, the hook's block or addresses,
 * fake A/AAAA and HTTPS), parses, carries the question, an OPT record only
 * to an asker that sent one, and for fake-IP an address of the range that
 * maps back to the name. While every upstream answer sent was clean (it
 * parses, no bytes after its records), a relayed answer parses, is clean
 * and carries the asker's question as the asker wrote it. Nothing is
 * delivered after the server is freed, and nothing leaks.
 * DNS_SERVER_FUZZ_TRACE=1 prints each answer and upstream answer.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ev.h>

#include "dns/dns.h"
#include "dns/msg.h"
#include "fuzz.h"

#define MAX_QUERIES 64
#define MAX_SENT 8
#define FAKE4 "198.18.0.0/28"
#define FAKE6 "fdfe:dcba:9876::/64"

enum { C_FAKE = 1, C_HOOK = 2, C_CACHE = 4, C_TWO_ATTEMPTS = 8 };

struct query {
    const uint8_t *wire; /* the input's bytes */
    size_t len, cap;     /* the largest answer allowed */
    int parsed, answers, sync_answers;
    struct dns_msg *m;   /* when parsed */
};

static struct {
    struct ev_loop *loop;
    int ufd, tfd;
    struct sockaddr_in up;
    struct dns_resolver *r;
    struct dns_server *s;
    int alive, in_call, clean, hook_seed, fake;
    size_t nq;
    struct query q[MAX_QUERIES];
    struct dns_msg msgs[MAX_QUERIES];
    /* datagrams chute sent upstream and not yet answered */
    uint8_t sent[MAX_SENT][DNS_MSG_MAX];
    size_t sent_len[MAX_SENT], nsent;
    struct sockaddr_in sent_from[MAX_SENT];
} h;

static struct dns_msg reply_m, up_m;
static int trace; /* DNS_SERVER_FUZZ_TRACE=1: each answer on stderr, for writing seeds */
static uint8_t resp[DNS_MSG_MAX + DNS_NAME_MAX + 16];

static const size_t maxes[8] = {100, 512, 1232, 1452, 1472, 4096, 9000, DNS_MSG_MAX};

static void
setup(void)
{
    if (h.loop != NULL)
        return;
    h.loop = ev_loop_new(EVFLAG_AUTO);
    CHECK(h.loop != NULL);
    /* A UDP port whose TCP twin is free too. */
    for (int tries = 0; tries < 64; tries++) {
        h.ufd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        h.tfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(h.ufd >= 0 && h.tfd >= 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t al = sizeof(a);
        CHECK(bind(h.ufd, (struct sockaddr *)&a, sizeof(a)) == 0);
        CHECK(getsockname(h.ufd, (struct sockaddr *)&a, &al) == 0);
        if (bind(h.tfd, (struct sockaddr *)&a, sizeof(a)) == 0) {
            h.up = a;
            return;
        }
        close(h.ufd);
        close(h.tfd);
    }
    abort();
}

/* ---- what the server must do ------------------------------------------- */

static uint32_t
fnv(const char *s)
{
    uint32_t x = 2166136261u;
    for (; *s; s++)
        x = (x ^ (uint8_t)*s) * 16777619u;
    return x;
}

/* The hook: a decision from the name and the input's seed. */
static void
decide(const char *name, struct dns_hook_result *out)
{
    uint32_t x = fnv(name) ^ (uint32_t)h.hook_seed * 2654435761u;
    static const enum dns_hook_action acts[8] = {
        DNS_HOOK_NONE, DNS_HOOK_NONE, DNS_HOOK_NONE, DNS_HOOK_BLOCK,
        DNS_HOOK_ADDRS, DNS_HOOK_ADDRS, DNS_HOOK_REAL, DNS_HOOK_NONE};
    memset(out, 0, sizeof(*out));
    out->action = acts[x & 7];
    if (out->action != DNS_HOOK_ADDRS)
        return;
    out->n4 = (x >> 8) % (DNS_HOOK_MAX_ADDRS + 1);
    out->n6 = (x >> 12) % (DNS_HOOK_MAX_ADDRS + 1);
    for (size_t i = 0; i < DNS_HOOK_MAX_ADDRS; i++) {
        memcpy(out->v4[i], (uint8_t[]){192, 0, 2, (uint8_t)(i + 1)}, 4);
        memcpy(out->v6[i], (uint8_t[]){0x20, 0x01, 0x0d, 0xb8, [15] = (uint8_t)(i + 1)}, 16);
    }
}

static int hook_calls;

static void
hook(void *arg, const char *name, uint16_t qtype, struct dns_hook_result *out)
{
    CHECK(h.in_call && name[0] != '\0');
    hook_calls++;
    decide(name, out);
}

static int
excluded(const char *n)
{
    size_t l = strlen(n), s = strlen(".excluded.test");
    return l <= 253 && (strcmp(n, "direct.test") == 0 || strcmp(n, "excluded.test") == 0 ||
                        (l > s && strcmp(n + l - s, ".excluded.test") == 0));
}

/* A name the fake-IP pool takes, as it reads the text: pieces between
 * dots (escaped ones too) of 1..63 characters. */
static int
fake_name_ok(const char *n)
{
    size_t label = 0, l = strlen(n);
    if (l == 0 || l > 253)
        return 0;
    for (; *n; n++) {
        if (*n != '.')
            label++;
        else if (label == 0)
            return 0;
        else
            label = 0;
        if (label > 63)
            return 0;
    }
    return label != 0;
}

enum { E_NONE, E_FORMERR, E_NOTIMP, E_BLOCK, E_HOOK, E_FAKE, E_FAKE_HTTPS, E_FORWARD };

static int
expected(const struct query *q, struct dns_hook_result *hr)
{
    const struct dns_msg *m = q->m;
    memset(hr, 0, sizeof(*hr));
    if (q->len < DNS_HEADER_LEN)
        return E_NONE;
    if (!q->parsed || m->qdcount != 1 || (m->flags & DNS_FLAG_QR))
        return q->wire[2] & 0x80 ? E_NONE : E_FORMERR;
    if (DNS_OPCODE(m->flags) != 0)
        return E_NOTIMP;
    if (h.hook_seed >= 0 && m->qname[0] != '\0')
        decide(m->qname, hr);
    if (hr->action == DNS_HOOK_BLOCK)
        return E_BLOCK;
    if (hr->action == DNS_HOOK_ADDRS)
        return E_HOOK;
    int addr_q = m->qclass == DNS_CLASS_IN && (m->qtype == DNS_TYPE_A || m->qtype == DNS_TYPE_AAAA);
    int fake = h.fake && m->qname[0] != '\0' && strchr(m->qname, '.') != NULL &&
               hr->action != DNS_HOOK_REAL && !excluded(m->qname);
    if (fake && addr_q)
        return E_FAKE;
    if (fake && m->qclass == DNS_CLASS_IN && m->qtype == DNS_TYPE_HTTPS)
        return E_FAKE_HTTPS;
    return E_FORWARD;
}

/* Where a parsed message's records end, or 0 when not all were kept. */
static size_t
records_end(const struct dns_msg *m)
{
    size_t total = (size_t)m->ancount + m->nscount + m->arcount;
    if (m->nrr != total)
        return 0;
    if (m->nrr == 0)
        return m->qdcount == 1 ? m->question_end : m->qdcount == 0 ? DNS_HEADER_LEN : 0;
    return m->rr[m->nrr - 1].rdata_off + m->rr[m->nrr - 1].rdlen;
}

/* ---- the answers -------------------------------------------------------- */

static void
check_built(const struct query *q, const uint8_t *p, size_t n)
{
    struct dns_hook_result hr;
    int e = expected(q, &hr);
    const struct dns_msg *m = q->m;

    CHECK(e != E_NONE && e != E_FORWARD);
    CHECK(dns_msg_parse(&reply_m, p, n) == 0);
    const struct dns_msg *a = &reply_m;
    int tc = (a->flags & DNS_FLAG_TC) != 0;
    CHECK(records_end(a) == n); /* nothing after the records (TC: the question) */
    if (e == E_FORMERR) {
        CHECK(n == DNS_HEADER_LEN && DNS_RCODE(a->flags) == DNS_RCODE_FORMERR);
        return;
    }
    /* The question, as parsed; an OPT record only to an asker with one. */
    CHECK(a->qdcount == 1 && strcmp(a->qname, m->qname) == 0 && a->qtype == m->qtype &&
          a->qclass == m->qclass);
    CHECK(tc ? !a->has_edns : a->has_edns == m->has_edns);
    CHECK(DNS_OPCODE(a->flags) == DNS_OPCODE(m->flags) &&
          (a->flags & DNS_FLAG_RD) == (m->flags & DNS_FLAG_RD));
    int rcode = DNS_RCODE(a->flags);
    switch (e) {
    case E_NOTIMP:
        CHECK(rcode == DNS_RCODE_NOTIMP && a->nrr == (size_t)a->has_edns);
        break;
    case E_BLOCK:
        CHECK(rcode == DNS_RCODE_NXDOMAIN && a->nan == 0 && (tc || a->nns == 1));
        break;
    case E_FAKE_HTTPS:
        CHECK(rcode == DNS_RCODE_NOERROR && a->nan == 0);
        break;
    case E_HOOK: {
        CHECK(rcode == DNS_RCODE_NOERROR);
        if (tc)
            break;
        int v6 = m->qtype == DNS_TYPE_AAAA;
        size_t want = m->qclass != DNS_CLASS_IN ? 0 : m->qtype == DNS_TYPE_A ? hr.n4 : v6 ? hr.n6 : 0;
        CHECK(a->nan == want);
        for (size_t i = 0; i < want; i++)
            CHECK(a->rr[i].ttl == 60 && a->rr[i].type == m->qtype &&
                  memcmp(a->rr[i].rdata, v6 ? hr.v6[i] : hr.v4[i], v6 ? 16 : 4) == 0);
        break;
    }
    case E_FAKE: {
        CHECK(rcode == DNS_RCODE_NOERROR);
        if (tc)
            break;
        int v = m->qtype == DNS_TYPE_A ? 4 : 6;
        CHECK(a->nan == (size_t)fake_name_ok(m->qname));
        if (a->nan == 1) {
            const struct dns_rr *rr = &a->rr[0];
            CHECK(rr->type == m->qtype && rr->ttl == 5 && rr->rdlen == (v == 4 ? 4 : 16));
            CHECK(dns_server_is_fake(h.s, rr->rdata, v));
            const char *back = dns_server_fake_name(h.s, rr->rdata, v);
            CHECK(back != NULL && strcmp(back, m->qname) == 0);
        }
        break;
    }
    default:
        abort();
    }
}

static void
check_relayed(const struct query *q, const uint8_t *p, size_t n)
{
    struct dns_hook_result hr;
    CHECK(expected(q, &hr) == E_FORWARD);
    if (!h.clean)
        return;
    CHECK(dns_msg_parse(&reply_m, p, n) == 0);
    const struct dns_msg *a = &reply_m;
    CHECK(records_end(a) == n);
    if (DNS_RCODE(a->flags) == DNS_RCODE_SERVFAIL && a->nrr == (size_t)a->has_edns)
        return; /* chute's own SERVFAIL: the question as parsed */
    /* The question exactly as the asker wrote it (letter case too). */
    size_t qlen = q->m->question_end - DNS_HEADER_LEN;
    CHECK(a->qdcount == 1 && a->question_end - DNS_HEADER_LEN == qlen &&
          memcmp(p + DNS_HEADER_LEN, q->wire + DNS_HEADER_LEN, qlen) == 0);
}

static void
on_answer(const void *ctx, const uint8_t *p, size_t n)
{
    uint32_t i;
    memcpy(&i, ctx, sizeof(i));
    CHECK(h.alive && i < h.nq);
    struct query *q = &h.q[i];
    CHECK(++q->answers == 1);
    q->sync_answers += h.in_call;
    CHECK(n >= DNS_HEADER_LEN && n <= q->cap);
    CHECK(p[0] == q->wire[0] && p[1] == q->wire[1] && (p[2] & 0x80));
    if (trace)
        fprintf(stderr, "query %u: %s answer, %zu bytes, rcode %d, %u answers%s\n", i,
                h.in_call ? "own" : "relayed", n, p[3] & 0xf, p[6] << 8 | p[7],
                p[2] & 2 ? ", TC" : "");
    if (h.in_call)
        check_built(q, p, n);
    else
        check_relayed(q, p, n);
}

/* ---- driving it ----------------------------------------------------------- */

static void
turn(void)
{
    for (int k = 0; k < 3; k++)
        ev_run(h.loop, EVRUN_NOWAIT);
}

static void
take_sent(void)
{
    static uint8_t extra[DNS_MSG_MAX];
    for (;;) {
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        uint8_t *dst = h.nsent < MAX_SENT ? h.sent[h.nsent] : extra; /* full: dropped */
        ssize_t n = recvfrom(h.ufd, dst, DNS_MSG_MAX, 0, (struct sockaddr *)&from, &fl);
        if (n < 0) {
            CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
            return;
        }
        CHECK(n >= DNS_HEADER_LEN && !(dst[2] & 0x80)); /* a query, from chute */
        if (dst == extra)
            continue;
        h.sent_len[h.nsent] = (size_t)n;
        h.sent_from[h.nsent++] = from;
    }
}

static void
query(const uint8_t *p, size_t n, unsigned kind)
{
    if (h.nq == MAX_QUERIES)
        return;
    uint32_t i = (uint32_t)h.nq++;
    struct query *q = &h.q[i];
    int udp = (kind & 3) == 0;
    size_t max = maxes[(kind >> 2) & 7];
    q->wire = p;
    q->len = n;
    q->m = &h.msgs[i];
    q->parsed = dns_msg_parse(q->m, p, n) == 0;
    size_t cap = max;
    if (udp) {
        size_t said = q->parsed && q->m->has_edns ? q->m->edns_udp_size : DNS_UDP_MAX;
        said = said < DNS_UDP_MAX ? DNS_UDP_MAX : said > 4096 ? 4096 : said;
        cap = said < cap ? said : cap;
    }
    q->cap = cap < DNS_UDP_MAX ? DNS_UDP_MAX : cap;

    struct dns_hook_result hr;
    int e = expected(q, &hr);
    int calls = hook_calls;
    h.in_call = 1;
    dns_server_query(h.s, p, n, max, udp, on_answer, &i, sizeof(i));
    h.in_call = 0;
    CHECK(hook_calls - calls <= 1);
    if (e == E_NONE || e == E_FORWARD)
        CHECK(q->sync_answers == 0);
    else
        CHECK(q->sync_answers == 1);
    take_sent();
    turn();
}

static void
upstream(const uint8_t *p, size_t n, unsigned kind)
{
    take_sent();
    if (h.nsent == 0 || n < DNS_HEADER_LEN)
        return;
    size_t k = kind & 8 ? h.nsent - 1 : 0;
    const uint8_t *sq = h.sent[k];
    size_t len = 0;

    if ((kind & 3) == 3 && dns_msg_parse(&up_m, sq, h.sent_len[k]) == 0 && up_m.qdcount == 1) {
        /* Header from the input, the question chute asked, the rest. */
        size_t ql = up_m.question_end - DNS_HEADER_LEN;
        memcpy(resp, p, DNS_HEADER_LEN);
        resp[4] = 0, resp[5] = 1;
        memcpy(resp + DNS_HEADER_LEN, sq + DNS_HEADER_LEN, ql);
        memcpy(resp + DNS_HEADER_LEN + ql, p + DNS_HEADER_LEN, n - DNS_HEADER_LEN);
        len = n + ql;
    } else {
        memcpy(resp, p, n);
        len = n;
    }
    if (len > 65507)
        len = 65507; /* the most one IPv4 datagram carries */
    resp[0] = sq[0], resp[1] = sq[1];
    resp[2] |= 0x80;
    if (!(kind & 4))
        resp[2] &= (uint8_t)~(DNS_FLAG_TC >> 8);
    if (dns_msg_parse(&up_m, resp, len) != 0 || records_end(&up_m) != len)
        h.clean = 0;
    CHECK(sendto(h.ufd, resp, len, 0, (struct sockaddr *)&h.sent_from[k],
                 sizeof(h.sent_from[k])) == (ssize_t)len);
    memmove(&h.sent[k], &h.sent[k + 1], (h.nsent - k - 1) * sizeof(h.sent[0]));
    memmove(&h.sent_len[k], &h.sent_len[k + 1], (h.nsent - k - 1) * sizeof(h.sent_len[0]));
    memmove(&h.sent_from[k], &h.sent_from[k + 1], (h.nsent - k - 1) * sizeof(h.sent_from[0]));
    h.nsent--;
    if (trace)
        fprintf(stderr, "upstream: %zu bytes to query %zu of %zu sent%s\n", len, k + 1, h.nsent + 1,
                h.clean ? "" : " (not clean)");
    turn();
    take_sent(); /* retries, the next attempt */
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    if (size < 1)
        return 0;
    setup();
    unsigned cfg = data[0];
    trace = getenv("DNS_SERVER_FUZZ_TRACE") != NULL;

    struct dns_resolver_opts ro;
    dns_resolver_opts_default(&ro);
    memcpy(&ro.upstream[0], &h.up, sizeof(h.up));
    ro.nupstream = 1;
    ro.timeout = 60;
    ro.attempts = cfg & C_TWO_ATTEMPTS ? 2 : 1;
    ro.cache_entries = cfg & C_CACHE ? 16 : 0;
    ro.hosts_file = "";
    ro.families = DNS_FAMILY_V4 | DNS_FAMILY_V6;
    h.r = dns_resolver_new(h.loop, &ro, err, sizeof(err));
    CHECK(h.r != NULL);

    static const char *const exclude[] = {"+.excluded.test", "direct.test"};
    struct dns_server_opts so = {.mode = cfg & C_FAKE ? DNS_MODE_FAKE_IP : DNS_MODE_REAL_IP,
                                 .range4 = FAKE4, .range6 = FAKE6, .fake_ttl = 5,
                                 .exclude = exclude, .nexclude = 2};
    h.s = dns_server_new(h.loop, h.r, &so, err, sizeof(err));
    CHECK(h.s != NULL);
    h.hook_seed = cfg & C_HOOK ? (int)(cfg >> 4) : -1;
    h.fake = (cfg & C_FAKE) != 0;
    if (cfg & C_HOOK)
        dns_server_set_hook(h.s, hook, NULL);
    h.alive = 1;
    h.clean = 1;
    h.nq = 0;
    h.nsent = 0;
    memset(h.q, 0, sizeof(h.q));

    const uint8_t *p = data + 1;
    size_t n = size - 1;
    while (n >= 3) {
        unsigned kind = p[0];
        size_t l = (size_t)p[1] << 8 | p[2];
        p += 3, n -= 3;
        l = l < n ? l : n;
        if ((kind & 3) < 2)
            query(p, l, kind);
        else
            upstream(p, l, kind);
        p += l, n -= l;
    }

    struct dns_server_stats st;
    dns_server_stats(h.s, &st);
    CHECK(st.queries == h.nq);
    h.alive = 0;
    dns_server_free(h.s);
    h.s = NULL;
    dns_resolver_free(h.r);
    h.r = NULL;
    turn();
    take_sent(); /* nothing is left for the next input */
    return 0;
}
