#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../loop.h"
#include <ev.h>

#include "../peer.h"
#include "dns/dns.h"
#include "dns/msg.h"
#include "dns/revmap.h"
#include "dns/upstream.h"

/* A scripted upstream on 127.0.0.1 (UDP and TCP on one port), served by
 * the test's own loop. */
enum { ZONE_ADDR, ZONE_CNAME, ZONE_NX, ZONE_SERVFAIL, ZONE_SILENT };

struct fake;

struct fconn {
    struct fake *f;
    int fd;
    ev_io w;
    uint8_t buf[4096];
    size_t len;
};

#define FAKE_CONNS 4

struct fake {
    struct ev_loop *loop;
    int ufd, lfd;
    ev_io uw, lw;
    struct fconn conn[FAKE_CONNS];
    struct sockaddr_in addr;
    int zone;
    int drop_first;     /* UDP queries to ignore first */
    int tc_udp;         /* UDP answers truncated, TCP answers whole */
    int bad_id_first;   /* a forged answer (wrong ID) precedes the real one */
    int silent_aaaa;
    int nudp, ntcp;
    int no_edns;        /* queries that lacked OPT with 1232 */
    uint16_t port[64], id[64], type[64];
};

static struct dns_msg qm; /* 19 KB: off the cmocka stack */

static void
put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static uint16_t
get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

/* Appends a record to section 0 (answer) or 1 (authority). */
static size_t
add_rr(uint8_t *out, size_t off, int section, const char *name, uint16_t type, uint32_t ttl,
       const uint8_t *rdata, size_t rdlen)
{
    int n = dns_name_write(out + off, 512, name);
    assert_true(n > 0);
    off += (size_t)n;
    put16(out + off, type);
    put16(out + off + 2, DNS_CLASS_IN);
    put16(out + off + 4, (uint16_t)(ttl >> 16));
    put16(out + off + 6, (uint16_t)ttl);
    put16(out + off + 8, (uint16_t)rdlen);
    memcpy(out + off + 10, rdata, rdlen);
    uint8_t *count = out + 6 + 2 * section;
    put16(count, get16(count) + 1);
    return off + 10 + rdlen;
}

static size_t
add_cname(uint8_t *out, size_t off, const char *name, const char *target)
{
    uint8_t wire[300];
    int n = dns_name_write(wire, sizeof(wire), target);
    return add_rr(out, off, 0, name, DNS_TYPE_CNAME, 300, wire, (size_t)n);
}

static size_t
add_a(uint8_t *out, size_t off, const char *name, const char *ip)
{
    uint8_t a[16];
    if (inet_pton(AF_INET, ip, a) == 1)
        return add_rr(out, off, 0, name, DNS_TYPE_A, 300, a, 4);
    assert_int_equal(inet_pton(AF_INET6, ip, a), 1);
    return add_rr(out, off, 0, name, DNS_TYPE_AAAA, 300, a, 16);
}

/* The fake's answer to query |q|: its length, or 0 to stay silent. */
static size_t
answer(struct fake *f, const uint8_t *q, size_t qlen, uint8_t *out, int tcp)
{
    assert_int_equal(dns_msg_parse(&qm, q, qlen), 0);
    if (!qm.has_edns || qm.edns_udp_size != 1232)
        f->no_edns++;
    if (f->zone == ZONE_SILENT || (f->silent_aaaa && qm.qtype == DNS_TYPE_AAAA))
        return 0;
    memcpy(out, q, qm.question_end);
    int rcode = f->zone == ZONE_NX ? DNS_RCODE_NXDOMAIN
                : f->zone == ZONE_SERVFAIL ? DNS_RCODE_SERVFAIL : DNS_RCODE_NOERROR;
    uint16_t flags = DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA | (uint16_t)rcode;
    if (f->tc_udp && !tcp) {
        flags |= DNS_FLAG_TC;
        rcode = -1;
    }
    put16(out + 2, flags);
    memset(out + 6, 0, 6);
    size_t off = qm.question_end;
    int a = qm.qtype == DNS_TYPE_A, aaaa = qm.qtype == DNS_TYPE_AAAA;
    if (rcode == DNS_RCODE_NXDOMAIN) {
        uint8_t soa[128];
        int n = dns_name_write(soa, sizeof(soa), "ns.test");
        n += dns_name_write(soa + n, sizeof(soa) - (size_t)n, "admin.test");
        static const uint8_t nums[20] = {0, 0, 0, 1, 0, 0, 14, 16, 0, 0, 2, 88,
                                         0, 9, 58, 128, 0, 0, 0, 60};
        memcpy(soa + n, nums, sizeof(nums));
        off = add_rr(out, off, 1, "test", DNS_TYPE_SOA, 60, soa, (size_t)n + sizeof(nums));
    } else if (rcode == DNS_RCODE_NOERROR && f->zone == ZONE_CNAME) {
        /* Out of order on purpose, with a stray record for another name. */
        off = add_cname(out, off, "a.chain.test", "b.chain.test");
        if (a)
            off = add_a(out, off, "b.chain.test", "192.0.2.20");
        if (aaaa)
            off = add_a(out, off, "b.chain.test", "2001:db8::20");
        off = add_cname(out, off, qm.qname, "a.chain.test");
        if (a)
            off = add_a(out, off, "other.test", "198.51.100.99");
    } else if (rcode == DNS_RCODE_NOERROR) {
        if (a) {
            off = add_a(out, off, qm.qname, "192.0.2.10");
            off = add_a(out, off, qm.qname, "192.0.2.11");
        }
        if (aaaa)
            off = add_a(out, off, qm.qname, "2001:db8::10");
    }
    return off;
}

static void
on_fake_udp(struct ev_loop *loop, ev_io *w, int revents)
{
    struct fake *f = w->data;
    uint8_t q[2048], out[2048];
    struct sockaddr_in from;
    socklen_t fl = sizeof(from);
    ssize_t n = recvfrom(f->ufd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
    if (n <= 0)
        return;
    if (f->nudp < 64 && dns_msg_parse(&qm, q, (size_t)n) == 0) {
        f->port[f->nudp] = ntohs(from.sin_port);
        f->id[f->nudp] = get16(q);
        f->type[f->nudp] = qm.qtype;
    }
    f->nudp++;
    if (f->drop_first > 0) {
        f->drop_first--;
        return;
    }
    size_t len = answer(f, q, (size_t)n, out, 0);
    if (len == 0)
        return;
    if (f->bad_id_first) {
        uint8_t forged[2048];
        memcpy(forged, out, len);
        put16(forged, get16(out) ^ 0x5a5a);
        /* The forged copy carries another address, which must not leak out. */
        for (size_t i = qm.question_end; i + 4 <= len; i++)
            if (memcmp(forged + i, "\xc0\x00\x02\x0a", 4) == 0)
                memcpy(forged + i, "\xc6\x33\x64\x42", 4);
        sendto(f->ufd, forged, len, 0, (struct sockaddr *)&from, fl);
    }
    sendto(f->ufd, out, len, 0, (struct sockaddr *)&from, fl);
}

static void
conn_close(struct fconn *c)
{
    ev_io_stop(c->f->loop, &c->w);
    close(c->fd);
    c->fd = -1;
}

static void
on_fake_conn(struct ev_loop *loop, ev_io *w, int revents)
{
    struct fconn *c = w->data;
    ssize_t n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
    if (n > 0)
        c->len += (size_t)n;
    if (n > 0 && (c->len < 2 || c->len < 2u + get16(c->buf)))
        return;
    if (n > 0) {
        c->f->ntcp++;
        uint8_t out[2048];
        size_t len = answer(c->f, c->buf + 2, get16(c->buf), out + 2, 1);
        put16(out, (uint16_t)len);
        if (len > 0)
            assert_int_equal(write(c->fd, out, len + 2), (ssize_t)len + 2);
    }
    conn_close(c);
}

static void
on_fake_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    struct fake *f = w->data;
    int fd = accept4(f->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    for (int i = 0; i < FAKE_CONNS; i++) {
        struct fconn *c = &f->conn[i];
        if (c->fd >= 0)
            continue;
        c->f = f;
        c->fd = fd;
        c->len = 0;
        ev_io_init(&c->w, on_fake_conn, fd, EV_READ);
        c->w.data = c;
        ev_io_start(loop, &c->w);
        return;
    }
    close(fd);
}

static void
fake_start(struct fake *f, struct ev_loop *loop, int zone)
{
    memset(f, 0, sizeof(*f));
    f->loop = loop;
    f->zone = zone;
    for (int i = 0; i < FAKE_CONNS; i++)
        f->conn[i].fd = -1;
    for (int tries = 0; tries < 20; tries++) {
        f->ufd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        f->addr.sin_family = AF_INET;
        f->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        f->addr.sin_port = 0;
        assert_int_equal(bind(f->ufd, (struct sockaddr *)&f->addr, sizeof(f->addr)), 0);
        socklen_t len = sizeof(f->addr);
        getsockname(f->ufd, (struct sockaddr *)&f->addr, &len);
        f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        int one = 1;
        setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(f->lfd, (struct sockaddr *)&f->addr, sizeof(f->addr)) == 0 && listen(f->lfd, 8) == 0)
            break;
        close(f->ufd);
        close(f->lfd);
    }
    ev_io_init(&f->uw, on_fake_udp, f->ufd, EV_READ);
    f->uw.data = f;
    ev_io_start(loop, &f->uw);
    ev_io_init(&f->lw, on_fake_accept, f->lfd, EV_READ);
    f->lw.data = f;
    ev_io_start(loop, &f->lw);
}

static void
fake_stop(struct fake *f)
{
    ev_io_stop(f->loop, &f->uw);
    ev_io_stop(f->loop, &f->lw);
    for (int i = 0; i < FAKE_CONNS; i++)
        if (f->conn[i].fd >= 0)
            conn_close(&f->conn[i]);
    close(f->ufd);
    close(f->lfd);
}


struct result {
    int calls;
    const char *err;
    size_t n;
    char addr[DNS_MAX_ADDRS][INET6_ADDRSTRLEN];
};

static void
on_resolved(void *arg, const char *err, const struct sockaddr_storage *addrs, size_t n)
{
    struct result *res = arg;
    res->calls++;
    res->err = err;
    res->n = n;
    for (size_t i = 0; i < n; i++) {
        if (addrs[i].ss_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)&addrs[i])->sin_addr, res->addr[i],
                      sizeof(res->addr[i]));
        else
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&addrs[i])->sin6_addr, res->addr[i],
                      sizeof(res->addr[i]));
    }
}

struct fwd {
    int calls;
    const char *err;
    uint8_t resp[2048];
    size_t len;
};

static void
on_forwarded(void *arg, const uint8_t *resp, size_t len, const char *err)
{
    struct fwd *f = arg;
    f->calls++;
    f->err = err;
    f->len = len;
    if (resp != NULL)
        memcpy(f->resp, resp, len < sizeof(f->resp) ? len : sizeof(f->resp));
}

static struct ev_loop *loop;

static int
setup(void **state)
{
    loop = ev_loop_new(EVFLAG_AUTO);
    return loop == NULL;
}

static int
teardown(void **state)
{
    ev_loop_destroy(loop);
    return 0;
}

static void
opts_for(struct dns_resolver_opts *o, struct fake *const *fakes, size_t n)
{
    dns_resolver_opts_default(o);
    for (size_t i = 0; i < n; i++)
        memcpy(&o->upstream[i], &fakes[i]->addr, sizeof(fakes[i]->addr));
    o->nupstream = n;
    o->timeout = 0.15;
    o->attempts = 2;
    o->hosts_file = "";
    o->families = DNS_FAMILY_V4 | DNS_FAMILY_V6;
}

static struct dns_resolver *
resolver_for(struct fake *f)
{
    struct dns_resolver_opts o;
    struct fake *fs[1] = {f};
    opts_for(&o, fs, 1);
    char err[128];
    struct dns_resolver *r = dns_resolver_new(loop, &o, err, sizeof(err));
    assert_non_null(r);
    return r;
}

static void
resolve(struct dns_resolver *r, const char *name, struct result *res)
{
    memset(res, 0, sizeof(*res));
    assert_non_null(dns_resolve(r, name, on_resolved, res));
    assert_int_equal(res->calls, 0); /* never from inside the call */
    assert_true(loop_run_until(loop, &res->calls, 3));
}

static void
test_ip_literal(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_ADDR);
    struct dns_resolver *r = resolver_for(&f);
    struct result res;
    resolve(r, "192.0.2.1", &res);
    assert_null(res.err);
    assert_int_equal(res.n, 1);
    assert_string_equal(res.addr[0], "192.0.2.1");
    resolve(r, "2001:db8::1", &res);
    assert_int_equal(res.n, 1);
    assert_string_equal(res.addr[0], "2001:db8::1");
    resolve(r, "bad..name", &res);
    assert_ptr_equal(res.err, dns_err_not_found);
    assert_int_equal(f.nudp, 0);
    struct dns_resolver_stats st;
    dns_resolver_stats(r, &st);
    assert_int_equal(st.queries, 3);
    assert_int_equal(st.sent, 0);
    dns_resolver_free(r);
    fake_stop(&f);
}

static void
test_hosts_file(void **state)
{
    char path[] = "/tmp/chute-hosts-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "# test hosts\n192.0.2.5 myhost.test alias.test  # trailing\n"
                       "2001:db8::5\tMyHost.Test\nnot-an-ip bogus.test\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    struct fake f;
    fake_start(&f, loop, ZONE_ADDR);
    struct dns_resolver_opts o;
    struct fake *fs[1] = {&f};
    opts_for(&o, fs, 1);
    o.hosts_file = path;
    char err[128];
    struct dns_resolver *r = dns_resolver_new(loop, &o, err, sizeof(err));
    assert_non_null(r);
    struct result res;
    resolve(r, "MYHOST.test.", &res);
    assert_null(res.err);
    assert_int_equal(res.n, 2);
    assert_string_equal(res.addr[0], "2001:db8::5"); /* v6 first */
    assert_string_equal(res.addr[1], "192.0.2.5");
    resolve(r, "alias.test", &res);
    assert_int_equal(res.n, 1);
    resolve(r, "localhost", &res); /* not in the file: loopback anyway */
    assert_int_equal(res.n, 2);
    assert_string_equal(res.addr[0], "::1");
    assert_string_equal(res.addr[1], "127.0.0.1");
    assert_int_equal(f.nudp, 0);
    struct dns_resolver_stats st;
    dns_resolver_stats(r, &st);
    assert_int_equal(st.hosts_hits, 3);

    /* A reload reads the file again. */
    o.hosts_file = "";
    assert_int_equal(dns_resolver_configure(r, &o, err, sizeof(err)), 0);
    resolve(r, "alias.test", &res);
    assert_int_equal(f.nudp, 2);
    dns_resolver_free(r);
    fake_stop(&f);
    unlink(path);
}

static void
test_answer_and_cache(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_ADDR);
    struct dns_resolver *r = resolver_for(&f);
    struct result res;
    resolve(r, "Addr.Test", &res);
    assert_null(res.err);
    assert_int_equal(res.n, 3);
    assert_string_equal(res.addr[0], "2001:db8::10");
    assert_string_equal(res.addr[1], "192.0.2.10");
    assert_string_equal(res.addr[2], "192.0.2.11");
    assert_int_equal(f.nudp, 2);
    assert_int_equal(f.no_edns, 0);
    assert_true(f.port[0] != f.port[1]); /* a fresh socket per query */

    resolve(r, "addr.test", &res); /* from the cache */
    assert_int_equal(res.n, 3);
    assert_int_equal(f.nudp, 2);
    struct dns_resolver_stats st;
    dns_resolver_stats(r, &st);
    assert_int_equal(st.sent, 2);
    assert_int_equal(st.cache_hits, 2);
    assert_int_equal(st.cache_misses, 2);
    assert_int_equal(st.cache_entries, 2);
    assert_int_equal(st.reverse_entries, 3);
    dns_resolver_free(r);
    fake_stop(&f);
}

static void
test_retry_after_drop(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_ADDR);
    f.drop_first = 2;
    struct dns_resolver *r = resolver_for(&f);
    struct result res;
    resolve(r, "retry.test", &res);
    assert_null(res.err);
    assert_int_equal(res.n, 3);
    assert_int_equal(f.nudp, 4);
    /* Each retry comes from a new source port. */
    for (int i = 2; i < 4; i++) {
        int orig = f.type[i] == f.type[0] ? 0 : 1;
        assert_int_equal(f.type[i], f.type[orig]);
        assert_true(f.port[i] != f.port[orig]);
    }
    struct dns_resolver_stats st;
    dns_resolver_stats(r, &st);
    assert_int_equal(st.timeouts, 2);
    assert_int_equal(st.sent, 4);
    dns_resolver_free(r);
    fake_stop(&f);
}

static void
test_timeout(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_SILENT);
    struct dns_resolver *r = resolver_for(&f);
    struct result res;
    ev_now_update(loop);
    double t0 = ev_now(loop);
    resolve(r, "silent.test", &res);
    ev_now_update(loop);
    assert_ptr_equal(res.err, dns_err_timeout);
    assert_int_equal(res.n, 0);
    assert_int_equal(f.nudp, 4); /* two types, two attempts */
    assert_true(ev_now(loop) - t0 >= 0.29);
    struct dns_resolver_stats st;
    dns_resolver_stats(r, &st);
    assert_int_equal(st.timeouts, 4);
    assert_int_equal(st.failures, 2);

    /* dns_forward reports it too. */
    uint8_t q[512];
    int n = dns_build_query(q, sizeof(q), 7, "silent.test", DNS_TYPE_TXT, 0);
    struct fwd fw = {0};
    assert_non_null(dns_forward(r, q, (size_t)n, on_forwarded, &fw));
    assert_true(loop_run_until(loop, &fw.calls, 3));
    assert_ptr_equal(fw.err, dns_err_timeout);
    assert_int_equal(fw.len, 0);
    dns_resolver_free(r);
    fake_stop(&f);
}

static void
test_tcp_fallback(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_ADDR);
    f.tc_udp = 1;
    struct dns_resolver *r = resolver_for(&f);
    struct result res;
    resolve(r, "big.test", &res);
    assert_null(res.err);
    assert_int_equal(res.n, 3);
    assert_int_equal(f.nudp, 2);
    assert_int_equal(f.ntcp, 2);
    struct dns_resolver_stats st;
    dns_resolver_stats(r, &st);
    assert_int_equal(st.truncated_tcp, 2);
    assert_int_equal(st.sent, 4);
    dns_resolver_free(r);
    fake_stop(&f);
}

static void
test_nxdomain_negative_cache(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_NX);
    struct dns_resolver *r = resolver_for(&f);
    struct result res;
    resolve(r, "nope.test", &res);
    assert_ptr_equal(res.err, dns_err_not_found);
    loop_run_until(loop, NULL, 0.05); /* the other type's answer lands in the cache too */
    assert_int_equal(f.nudp, 2);
    resolve(r, "nope.test", &res);
    assert_ptr_equal(res.err, dns_err_not_found);
    assert_int_equal(f.nudp, 2); /* nothing sent */
    dns_resolver_free(r);
    fake_stop(&f);
}

static void
test_cname_chain(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_CNAME);
    struct dns_resolver *r = resolver_for(&f);
    struct result res;
    resolve(r, "www.chain.test", &res);
    assert_null(res.err);
    assert_int_equal(res.n, 2);
    assert_string_equal(res.addr[0], "2001:db8::20");
    assert_string_equal(res.addr[1], "192.0.2.20");
    uint8_t ip[4] = {192, 0, 2, 20};
    assert_string_equal(dns_resolver_name_of(r, ip, 4), "www.chain.test");
    dns_resolver_free(r);
    fake_stop(&f);
}

static void
test_mismatched_id_ignored(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_ADDR);
    f.bad_id_first = 1;
    struct dns_resolver *r = resolver_for(&f);
    struct result res;
    resolve(r, "forged.test", &res);
    assert_null(res.err);
    assert_int_equal(res.n, 3);
    for (size_t i = 0; i < res.n; i++)
        assert_string_not_equal(res.addr[i], "198.51.100.66");
    assert_string_equal(res.addr[1], "192.0.2.10");
    dns_resolver_free(r);
    fake_stop(&f);
}

static void
test_servfail_then_next_upstream(void **state)
{
    struct fake bad, good;
    fake_start(&bad, loop, ZONE_SERVFAIL);
    fake_start(&good, loop, ZONE_ADDR);
    struct dns_resolver_opts o;
    struct fake *fs[2] = {&bad, &good};
    opts_for(&o, fs, 2);
    char err[128];
    struct dns_resolver *r = dns_resolver_new(loop, &o, err, sizeof(err));
    struct result res;
    resolve(r, "sf.test", &res);
    assert_null(res.err);
    assert_int_equal(res.n, 3);
    assert_int_equal(bad.nudp, 2);
    assert_int_equal(good.nudp, 2);

    /* Only SERVFAIL everywhere: "server failure", after every attempt. */
    fs[1] = &bad;
    opts_for(&o, fs, 1);
    assert_int_equal(dns_resolver_configure(r, &o, err, sizeof(err)), 0);
    resolve(r, "sf2.test", &res);
    assert_ptr_equal(res.err, dns_err_servfail);
    assert_int_equal(bad.nudp, 6);
    dns_resolver_free(r);
    fake_stop(&bad);
    fake_stop(&good);
}

static void
test_coalescing(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_ADDR);
    struct dns_resolver *r = resolver_for(&f);
    struct result a = {0}, b = {0};
    struct fwd fw = {0};
    uint8_t q[512];
    int n = dns_build_query(q, sizeof(q), 0x1111, "same.test", DNS_TYPE_A, 0);
    assert_non_null(dns_resolve(r, "same.test", on_resolved, &a));
    assert_non_null(dns_resolve(r, "SAME.test", on_resolved, &b));
    assert_non_null(dns_forward(r, q, (size_t)n, on_forwarded, &fw));
    assert_true(loop_run_until(loop, &a.calls, 3));
    assert_true(loop_run_until(loop, &b.calls, 3));
    assert_true(loop_run_until(loop, &fw.calls, 3));
    assert_int_equal(a.n, 3);
    assert_int_equal(b.n, 3);
    assert_int_equal(get16(fw.resp), 0x1111);
    assert_int_equal(f.nudp, 2); /* one query per type for all three */
    dns_resolver_free(r);
    fake_stop(&f);
}

static void
test_cancel(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_ADDR);
    struct dns_resolver *r = resolver_for(&f);
    struct result res = {0};
    struct fwd fw = {0};

    /* Before anything is sent back, and for a deferred literal. */
    dns_query_cancel(dns_resolve(r, "c1.test", on_resolved, &res));
    dns_query_cancel(dns_resolve(r, "192.0.2.1", on_resolved, &res));
    /* In flight: the query reached the server. */
    struct dns_query *q = dns_resolve(r, "c2.test", on_resolved, &res);
    int sent = f.nudp + 1;
    while (f.nudp < sent)
        ev_run(loop, EVRUN_ONCE);
    dns_query_cancel(q);
    loop_run_until(loop, NULL, 0.1);
    assert_int_equal(res.calls, 0);

    /* A cache hit waiting for delivery. */
    uint8_t m[512];
    int n = dns_build_query(m, sizeof(m), 9, "c1.test", DNS_TYPE_A, 0);
    dns_query_cancel(dns_forward(r, m, (size_t)n, on_forwarded, &fw));
    loop_run_until(loop, NULL, 0.05);
    assert_int_equal(fw.calls, 0);

    /* Freeing with queries pending: no callbacks, nothing leaks. */
    dns_resolve(r, "p1.test", on_resolved, &res);
    dns_resolve(r, "10.0.0.1", on_resolved, &res);
    n = dns_build_query(m, sizeof(m), 9, "p2.test", DNS_TYPE_A, 0);
    dns_forward(r, m, (size_t)n, on_forwarded, &fw);
    dns_resolver_free(r);
    loop_run_until(loop, NULL, 0.1);
    assert_int_equal(res.calls, 0);
    assert_int_equal(fw.calls, 0);
    fake_stop(&f);
}

static void
test_forward(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_ADDR);
    struct dns_resolver *r = resolver_for(&f);
    uint8_t q[512];
    int n = dns_build_query(q, sizeof(q), 0x1234, "fwd.test", DNS_TYPE_AAAA, 4096);
    memcpy(q + 13, "FwD", 3); /* 0x20 letter case: the asker's comes back */
    struct fwd fw = {0};
    assert_non_null(dns_forward(r, q, (size_t)n, on_forwarded, &fw));
    assert_true(loop_run_until(loop, &fw.calls, 3));
    assert_null(fw.err);
    assert_int_equal(get16(fw.resp), 0x1234);
    assert_int_equal(f.nudp, 1);
    assert_memory_equal(fw.resp + 12, q + 12, 14);
    assert_int_equal(dns_msg_parse(&qm, fw.resp, fw.len), 0);
    assert_int_equal(qm.nan, 1);
    uint8_t ip6[16];
    inet_pton(AF_INET6, "2001:db8::10", ip6);
    assert_string_equal(dns_resolver_name_of(r, ip6, 6), "fwd.test");

    /* Again: from the cache, with the new asker's ID, never inside the call. */
    put16(q, 0x4321);
    memset(&fw, 0, sizeof(fw));
    assert_non_null(dns_forward(r, q, (size_t)n, on_forwarded, &fw));
    assert_int_equal(fw.calls, 0);
    assert_true(loop_run_until(loop, &fw.calls, 3));
    assert_int_equal(get16(fw.resp), 0x4321);
    assert_memory_equal(fw.resp + 12, q + 12, 14);
    assert_int_equal(f.nudp, 1);

    /* Not a plain IN query (CHAOS): sent as is, every time, not cached. */
    n = dns_build_query(q, sizeof(q), 0x5555, "version.bind", DNS_TYPE_TXT, 0);
    q[n - 1] = 3;
    for (int i = 0; i < 2; i++) {
        memset(&fw, 0, sizeof(fw));
        assert_non_null(dns_forward(r, q, (size_t)n, on_forwarded, &fw));
        assert_true(loop_run_until(loop, &fw.calls, 3));
        assert_null(fw.err);
        assert_int_equal(get16(fw.resp), 0x5555);
        assert_int_equal(f.nudp, 2 + i);
    }
    assert_int_equal(f.no_edns, 2);

    /* Garbage does not parse. */
    uint8_t bad[4] = {1, 2, 3};
    assert_null(dns_forward(r, bad, sizeof(bad), on_forwarded, &fw));
    dns_resolver_free(r);
    fake_stop(&f);
}

static void
test_dead_aaaa_grace(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_ADDR);
    f.silent_aaaa = 1;
    struct dns_resolver_opts o;
    struct fake *fs[1] = {&f};
    opts_for(&o, fs, 1);
    o.timeout = 2;
    char err[128];
    struct dns_resolver *r = dns_resolver_new(loop, &o, err, sizeof(err));
    struct result res;
    ev_now_update(loop);
    double t0 = ev_now(loop);
    resolve(r, "v4only.test", &res);
    ev_now_update(loop);
    assert_true(ev_now(loop) - t0 < 0.5);
    assert_null(res.err);
    assert_int_equal(res.n, 2);
    assert_string_equal(res.addr[0], "192.0.2.10");
    dns_resolver_free(r);
    fake_stop(&f);
}

static void
test_idle_resolver_lets_loop_end(void **state)
{
    struct dns_resolver_opts o;
    dns_resolver_opts_default(&o);
    o.hosts_file = "";
    char err[128];
    struct dns_resolver *r = dns_resolver_new(loop, &o, err, sizeof(err));
    assert_non_null(r);
    assert_int_equal(ev_run(loop, 0), 0); /* returns: nothing active */
    struct result res = {0};
    dns_resolve(r, "127.0.0.1", on_resolved, &res);
    ev_run(loop, 0);
    assert_int_equal(res.calls, 1);
    dns_resolver_free(r);
}

static void
test_revmap_lru(void **state)
{
    struct dns_revmap *m = dns_revmap_new(300);
    uint8_t ip[4] = {10, 0, 0, 0};
    char name[32];
    for (int i = 0; i < 1000; i++) {
        ip[2] = (uint8_t)(i >> 8), ip[3] = (uint8_t)i;
        snprintf(name, sizeof(name), "n%d.test", i % 7);
        assert_int_equal(dns_revmap_put(m, ip, 4, name), 0);
        if (i == 750) { /* entries 451..750 are in: keep 600 recent */
            ip[2] = 600 >> 8, ip[3] = 600 & 0xff;
            assert_string_equal(dns_revmap_get(m, ip, 4), "n5.test");
        }
    }
    /* 751..999 evicted 451..599 and 601..700. */
    assert_int_equal(dns_revmap_count(m), 300);
    ip[2] = 600 >> 8, ip[3] = 600 & 0xff;
    assert_string_equal(dns_revmap_get(m, ip, 4), "n5.test");
    ip[2] = 700 >> 8, ip[3] = 700 & 0xff;
    assert_null(dns_revmap_get(m, ip, 4));
    ip[2] = 701 >> 8, ip[3] = 701 & 0xff;
    assert_string_equal(dns_revmap_get(m, ip, 4), "n1.test");
    ip[2] = 999 >> 8, ip[3] = 999 & 0xff;
    assert_string_equal(dns_revmap_get(m, ip, 4), "n5.test");
    assert_int_equal(dns_revmap_put(m, ip, 4, "renamed.test"), 0);
    assert_string_equal(dns_revmap_get(m, ip, 4), "renamed.test");
    uint8_t ip6[16] = {0};
    memcpy(ip6, ip, 4);
    assert_null(dns_revmap_get(m, ip6, 6));
    dns_revmap_free(m);
}

static struct dns_resolver *freed_in_cb;

static void
on_resolved_free(void *arg, const char *err, const struct sockaddr_storage *addrs, size_t n)
{
    on_resolved(arg, err, addrs, n);
    dns_resolver_free(freed_in_cb);
}

static void
test_free_inside_callback(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_ADDR);
    struct dns_resolver *r = resolver_for(&f);
    struct result a = {0}, b = {0};
    struct fwd fw = {0};
    uint8_t q[512];
    int n = dns_build_query(q, sizeof(q), 1, "inside.test", DNS_TYPE_A, 0);
    freed_in_cb = r;
    /* All wait on the same A lookup (the resolves on one AAAA lookup too);
     * the first resolve called back frees, while the lookup delivers. */
    dns_resolve(r, "inside.test", on_resolved_free, &a);
    dns_resolve(r, "inside.test", on_resolved_free, &b);
    dns_forward(r, q, (size_t)n, on_forwarded, &fw);
    loop_run_until(loop, NULL, 0.3);
    assert_int_equal(fw.calls, 1);
    assert_int_equal(a.calls + b.calls, 1);
    fake_stop(&f);
}

static void
test_unreachable_upstream(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_ADDR);
    fake_stop(&f); /* its port now refuses */
    struct dns_resolver_opts o;
    struct fake *fs[1] = {&f};
    opts_for(&o, fs, 1);
    o.timeout = 5;
    char err[128];
    struct dns_resolver *r = dns_resolver_new(loop, &o, err, sizeof(err));
    struct result res;
    resolve(r, "refused.test", &res); /* well before 5 s */
    assert_ptr_equal(res.err, dns_err_timeout);

    /* No socket can even be sent from (link-local without a zone): still
     * reported from the loop. */
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&o.upstream[0];
    memset(s6, 0, sizeof(*s6));
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(53);
    inet_pton(AF_INET6, "fe80::1", &s6->sin6_addr);
    assert_int_equal(dns_resolver_configure(r, &o, err, sizeof(err)), 0);
    resolve(r, "nosocket.test", &res);
    assert_ptr_equal(res.err, dns_err_servfail);
    dns_resolver_free(r);
}

static void
test_tcp_refused(void **state)
{
    struct fake f;
    fake_start(&f, loop, ZONE_ADDR);
    f.tc_udp = 1;
    ev_io_stop(loop, &f.lw);
    close(f.lfd); /* TCP now refused */
    f.lfd = socket(AF_INET, SOCK_STREAM, 0);
    ev_io_set(&f.lw, f.lfd, EV_READ);
    struct dns_resolver *r = resolver_for(&f);
    struct result res;
    resolve(r, "tcpless.test", &res);
    assert_ptr_equal(res.err, dns_err_servfail);
    assert_int_equal(f.nudp, 4); /* each attempt: UDP (truncated), then TCP refused */
    struct dns_resolver_stats st;
    dns_resolver_stats(r, &st);
    assert_int_equal(st.truncated_tcp, 4);
    dns_resolver_free(r);
    fake_stop(&f);
}

static void
test_reload_keeps_cache(void **state)
{
    struct fake f, g;
    fake_start(&f, loop, ZONE_ADDR);
    fake_start(&g, loop, ZONE_ADDR);
    struct dns_resolver_opts o;
    struct fake *fs[1] = {&f};
    opts_for(&o, fs, 1);
    char err[128];
    struct dns_resolver *r = dns_resolver_new(loop, &o, err, sizeof(err));
    struct result res;
    resolve(r, "keep.test", &res);
    o.timeout = 1; /* same servers: the cache stays */
    assert_int_equal(dns_resolver_configure(r, &o, err, sizeof(err)), 0);
    resolve(r, "keep.test", &res);
    assert_int_equal(f.nudp, 2);
    fs[0] = &g; /* other servers: it goes */
    opts_for(&o, fs, 1);
    assert_int_equal(dns_resolver_configure(r, &o, err, sizeof(err)), 0);
    resolve(r, "keep.test", &res);
    assert_int_equal(res.n, 3);
    assert_int_equal(f.nudp, 2);
    assert_int_equal(g.nudp, 2);
    dns_resolver_free(r);
    fake_stop(&f);
    fake_stop(&g);
}

static void
test_resolvconf(void **state)
{
    char path[] = "/tmp/chute-resolv-XXXXXX";
    int fd = mkstemp(path);
    const char *text = "# x\nsearch example\nnameserver 192.0.2.53\nnameserver   2001:db8::53\n"
                       "nameserver bogus\noptions ndots:2\nnameserver 192.0.2.54\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    struct sockaddr_storage ss[2];
    assert_int_equal(dns_resolvconf_read(path, ss, 2), 2);
    const struct sockaddr_in *s4 = (const void *)&ss[0];
    const struct sockaddr_in6 *s6 = (const void *)&ss[1];
    assert_int_equal(s4->sin_family, AF_INET);
    assert_int_equal(ntohs(s4->sin_port), 53);
    assert_int_equal(ntohl(s4->sin_addr.s_addr), 0xC0000235);
    assert_int_equal(s6->sin6_family, AF_INET6);
    assert_int_equal(ntohs(s6->sin6_port), 53);
    assert_int_equal(dns_resolvconf_read("/nonexistent/resolv.conf", ss, 2), 0);
    unlink(path);
}

/* Starts dnsmasq on a free port of 127.0.0.1; its pid. */
static pid_t
dnsmasq_start(const char *bin, struct sockaddr_in *a)
{
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    *a = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(*a);
    bind(s, (struct sockaddr *)a, sizeof(*a));
    getsockname(s, (struct sockaddr *)a, &al);
    close(s);
    char port[16];
    snprintf(port, sizeof(port), "--port=%u", ntohs(a->sin_port));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execl(bin, bin, "--no-daemon", "--no-resolv", "--no-hosts", port,
              "--listen-address=127.0.0.1", "--bind-interfaces", "--pid-file=",
              "--address=/test.example/10.1.2.3", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* A real server: dnsmasq on an ephemeral port, if installed. */
static void
test_dnsmasq(void **state)
{
    const char *bin = peer_need("dnsmasq");
    struct dns_resolver_opts o;
    dns_resolver_opts_default(&o);
    o.nupstream = 1;
    o.timeout = 0.3;
    o.hosts_file = "";
    o.families = DNS_FAMILY_V4 | DNS_FAMILY_V6;
    char err[128];
    struct dns_resolver *r = dns_resolver_new(loop, &o, err, sizeof(err));
    struct result res = {.err = dns_err_timeout};
    /* A port taken meanwhile by someone else makes dnsmasq exit: new port. */
    for (int round = 0; round < 3 && res.err != NULL; round++) {
        struct sockaddr_in a;
        pid_t pid = dnsmasq_start(bin, &a);
        memcpy(&o.upstream[0], &a, sizeof(a));
        dns_resolver_configure(r, &o, err, sizeof(err));
        int exited = 0;
        for (int i = 0; i < 20 && !exited; i++) { /* until dnsmasq listens */
            resolve(r, "www.test.example", &res);
            if (res.err == NULL)
                break;
            loop_run_until(loop, NULL, 0.1);
            exited = waitpid(pid, NULL, WNOHANG) == pid;
        }
        if (!exited) {
            kill(pid, SIGTERM);
            waitpid(pid, NULL, 0);
        }
    }
    dns_resolver_free(r);
    if (res.err == dns_err_timeout)
        peer_missing("dnsmasq", "did not answer in three tries (it could not start here)");
    assert_null(res.err);
    assert_int_equal(res.n, 1);
    assert_string_equal(res.addr[0], "10.1.2.3");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ip_literal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hosts_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answer_and_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_drop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tcp_fallback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nxdomain_negative_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cname_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mismatched_id_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_servfail_then_next_upstream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coalescing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forward, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_aaaa_grace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_resolver_lets_loop_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_inside_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreachable_upstream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_keeps_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tcp_refused, setup, teardown),
        cmocka_unit_test(test_resolvconf),
        cmocka_unit_test(test_revmap_lru),
        cmocka_unit_test_setup_teardown(test_dnsmasq, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
