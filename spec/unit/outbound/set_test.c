#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "dns/dns.h"
#include "flow/flow.h"
#include "io/io.h"
#include "outbound/set_int.h" /* to read members' health in the end-to-end tests */
#include "outbound/ss_codec.h"

/* Proxies from id 2 on; the ids of the test set built by make_set(). */
enum { HK = 2, JP, US, SG, SEL, FB, AUTO, LB };

static struct outbound_proxy *
proxies(size_t n, const char *const *names)
{
    struct outbound_proxy *p = calloc(n ? n : 1, sizeof(*p));
    for (size_t i = 0; i < n; i++) {
        snprintf(p[i].name, sizeof(p[i].name), "%s", names[i]);
        p[i].type = OUTBOUND_SOCKS5;
        flow_addr_from_host(&p[i].server, "192.0.2.1", 9, 1080);
    }
    return p;
}

static void
group(struct outbound_group_cfg *g, const char *name, enum outbound_group_type type, size_t n,
      const int *members)
{
    memset(g, 0, sizeof(*g));
    snprintf(g->name, sizeof(g->name), "%s", name);
    g->type = type;
    g->members = malloc(n ? n * sizeof(int) : 1);
    if (n > 0)
        memcpy(g->members, members, n * sizeof(int));
    g->nmembers = n;
    g->tolerance = 50;
    g->timeout = 1;
    snprintf(g->where, sizeof(g->where), "test.lua:1");
}

static struct outbound_set *
make_set(void)
{
    static const char *const names[] = {"hk", "jp", "us", "sg"};
    struct outbound_group_cfg *g = calloc(4, sizeof(*g));
    group(&g[0], "sel", OUTBOUND_GROUP_SELECT, 3, (int[]){HK, JP, FLOW_POLICY_DIRECT});
    group(&g[1], "fb", OUTBOUND_GROUP_FALLBACK, 3, (int[]){HK, JP, US});
    group(&g[2], "auto", OUTBOUND_GROUP_URL_TEST, 3, (int[]){HK, JP, US});
    group(&g[3], "lb", OUTBOUND_GROUP_LOAD_BALANCE, 4, (int[]){HK, JP, US, SG});
    struct outbound_set *s = outbound_set_new(proxies(4, names), 4, g, 4);
    assert_non_null(s);
    return s;
}

static struct flow_addr
host(const char *name, uint16_t port)
{
    struct flow_addr a;
    memset(&a, 0, sizeof(a));
    assert_int_equal(flow_addr_from_host(&a, name, strlen(name), port), 0);
    return a;
}

static void
test_lookup_name_proxy(void **state)
{
    struct outbound_set *s = make_set();
    assert_int_equal(outbound_set_lookup(s, "DIRECT"), FLOW_POLICY_DIRECT);
    assert_int_equal(outbound_set_lookup(s, "REJECT"), FLOW_POLICY_REJECT);
    assert_int_equal(outbound_set_lookup(s, "hk"), HK);
    assert_int_equal(outbound_set_lookup(s, "sg"), SG);
    assert_int_equal(outbound_set_lookup(s, "sel"), SEL);
    assert_int_equal(outbound_set_lookup(s, "lb"), LB);
    assert_int_equal(outbound_set_lookup(s, "nope"), -1);
    assert_int_equal(outbound_set_lookup(s, "HK"), -1);
    assert_string_equal(outbound_set_name(s, FLOW_POLICY_DIRECT), "DIRECT");
    assert_string_equal(outbound_set_name(s, FLOW_POLICY_REJECT), "REJECT");
    assert_string_equal(outbound_set_name(s, JP), "jp");
    assert_string_equal(outbound_set_name(s, AUTO), "auto");
    assert_string_equal(outbound_set_name(s, LB + 1), "?");
    assert_string_equal(outbound_set_name(s, -1), "?");
    assert_string_equal(outbound_set_proxy(s, US)->name, "us");
    assert_null(outbound_set_proxy(s, FLOW_POLICY_DIRECT));
    assert_null(outbound_set_proxy(s, SEL));
    struct flow_addr a = host("example.com", 443);
    assert_int_equal(outbound_set_pick(s, HK, &a), HK);
    assert_int_equal(outbound_set_pick(s, FLOW_POLICY_REJECT, &a), FLOW_POLICY_REJECT);
    assert_int_equal(outbound_set_needs_tls(s), 0);
    assert_int_equal(outbound_set_needs_tls(NULL), 0);
    s->proxies[1].type = OUTBOUND_HTTP;
    assert_int_equal(outbound_set_needs_tls(s), 0);
    s->proxies[1].tls = 1; /* an https proxy */
    assert_int_equal(outbound_set_needs_tls(s), 1);
    s->proxies[1].type = OUTBOUND_TROJAN;
    assert_int_equal(outbound_set_needs_tls(s), 1);
    outbound_set_unref(s);

    /* Hundreds of proxies: each found by its name. */
    enum { N = 500 };
    char (*names)[24] = malloc(N * sizeof(*names));
    const char **np = malloc(N * sizeof(*np));
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "proxy-%d", i);
        np[i] = names[i];
    }
    s = outbound_set_new(proxies(N, np), N, NULL, 0);
    assert_non_null(s);
    for (int i = 0; i < N; i++)
        assert_int_equal(outbound_set_lookup(s, names[i]), FLOW_POLICY__BUILTIN + i);
    assert_int_equal(outbound_set_lookup(s, "proxy-500"), -1);
    outbound_set_unref(s);
    free(names);
    free(np);
}

static void
test_select(void **state)
{
    struct outbound_set *s = make_set();
    struct flow_addr a = host("example.com", 443);
    char err[160];
    assert_int_equal(outbound_set_pick(s, SEL, &a), HK);
    assert_int_equal(outbound_set_select(s, "sel", "DIRECT", err, sizeof(err)), 0);
    assert_int_equal(outbound_set_pick(s, SEL, &a), FLOW_POLICY_DIRECT);
    assert_int_equal(outbound_set_select(s, "sel", "jp", err, sizeof(err)), 0);
    outbound_set_report(s, JP, 1); /* health does not move a select group */
    assert_int_equal(outbound_set_pick(s, SEL, &a), JP);

    assert_int_equal(outbound_set_select(s, "sel", "xx", err, sizeof(err)), -1);
    assert_string_equal(err, "group 'sel' has no member 'xx' (members: hk, jp, DIRECT)");
    assert_int_equal(outbound_set_select(s, "fb", "hk", err, sizeof(err)), -1);
    assert_string_equal(err, "'fb' is not a select group");
    assert_int_equal(outbound_set_select(s, "hk", "hk", err, sizeof(err)), -1);
    assert_string_equal(err, "no group 'hk'");
    assert_int_equal(outbound_set_select(s, "zz", "hk", err, sizeof(err)), -1);
    assert_string_equal(err, "no group 'zz'");
    char tiny[12];
    assert_int_equal(outbound_set_select(s, "sel", "xx", tiny, sizeof(tiny)), -1);
    assert_string_equal(tiny, "group 'sel'");
    assert_int_equal(outbound_set_select(s, "sel", "xx", NULL, 0), -1);
    assert_int_equal(outbound_set_pick(s, SEL, &a), JP); /* failures change nothing */
    outbound_set_unref(s);
}

static void
test_fallback(void **state)
{
    struct outbound_set *s = make_set();
    struct flow_addr a = host("example.com", 443);
    assert_int_equal(outbound_set_pick(s, FB, &a), HK); /* all healthy until checked */
    outbound_set_report(s, HK, 1);
    assert_int_equal(outbound_set_pick(s, FB, &a), JP);
    assert_int_equal(outbound_set_note_latency(s, "fb", "jp", -1), 0);
    assert_int_equal(outbound_set_pick(s, FB, &a), US);
    outbound_set_report(s, US, 1);
    assert_int_equal(outbound_set_pick(s, FB, &a), US); /* all down: the last resort */
    outbound_set_report(s, JP, 0);
    assert_int_equal(outbound_set_pick(s, FB, &a), JP);
    assert_int_equal(outbound_set_note_latency(s, "fb", "hk", 300), 0);
    assert_int_equal(outbound_set_pick(s, FB, &a), HK);
    assert_int_equal(outbound_set_note_latency(s, "fb", "xx", 3), -1);
    assert_int_equal(outbound_set_note_latency(s, "nope", "hk", 3), -1);
    struct outbound_set_stats st;
    outbound_set_stats(s, &st);
    assert_int_equal(st.checks, 2);
    assert_int_equal(st.check_failures, 1);
    outbound_set_unref(s);
}

static void
test_url_test_tolerance(void **state)
{
    struct outbound_set *s = make_set();
    struct flow_addr a = host("example.com", 443);
    struct outbound_set_stats st;
    assert_int_equal(outbound_set_pick(s, AUTO, &a), HK); /* no data: the first */
    outbound_set_note_latency(s, "auto", "hk", 200);
    outbound_set_note_latency(s, "auto", "jp", 170); /* faster, within the 50 ms tolerance */
    assert_int_equal(outbound_set_pick(s, AUTO, &a), HK);
    outbound_set_note_latency(s, "auto", "us", 100); /* faster by more */
    assert_int_equal(outbound_set_pick(s, AUTO, &a), US);
    outbound_set_note_latency(s, "auto", "hk", 60); /* 60 + 50 > 100: stay */
    assert_int_equal(outbound_set_pick(s, AUTO, &a), US);
    outbound_set_note_latency(s, "auto", "hk", 49);
    assert_int_equal(outbound_set_pick(s, AUTO, &a), HK);
    outbound_set_stats(s, &st);
    assert_int_equal(st.switches, 2);

    outbound_set_report(s, HK, 1); /* down at once: the fastest healthy one */
    assert_int_equal(outbound_set_pick(s, AUTO, &a), US);
    outbound_set_report(s, HK, 0); /* up again, its last latency still counts */
    assert_int_equal(outbound_set_pick(s, AUTO, &a), HK);
    outbound_set_note_latency(s, "auto", "hk", -1);
    outbound_set_note_latency(s, "auto", "jp", -1);
    outbound_set_note_latency(s, "auto", "us", -1);
    assert_int_equal(outbound_set_pick(s, AUTO, &a), US); /* all down: keep the last */
    outbound_set_stats(s, &st);
    assert_int_equal(st.switches, 5);
    assert_int_equal(st.checks, 8);
    assert_int_equal(st.check_failures, 3);

    char buf[512];
    outbound_set_describe(s, buf, sizeof(buf));
    assert_non_null(strstr(buf, "auto=url-test:us hk=down jp=down us=down"));
    outbound_set_unref(s);
}

static void
test_load_balance(void **state)
{
    enum { NAMES = 10000 };
    struct outbound_set *s = make_set();
    static int before[NAMES];
    int share[4] = {0};
    char name[32];
    for (int i = 0; i < NAMES; i++) {
        snprintf(name, sizeof(name), "site%d.example", i);
        struct flow_addr a = host(name, 443);
        before[i] = outbound_set_pick(s, LB, &a);
        assert_true(before[i] >= HK && before[i] <= SG);
        share[before[i] - HK]++;
        struct flow_addr b = host(name, 80); /* one site, one member */
        assert_int_equal(outbound_set_pick(s, LB, &b), before[i]);
    }
    for (int k = 0; k < 4; k++)
        assert_true(share[k] > NAMES / 4 * 8 / 10 && share[k] < NAMES / 4 * 12 / 10);

    /* JP goes down: only its names move. */
    outbound_set_report(s, JP, 1);
    int kept = 0, others = 0;
    for (int i = 0; i < NAMES; i++) {
        snprintf(name, sizeof(name), "site%d.example", i);
        struct flow_addr a = host(name, 443);
        int now = outbound_set_pick(s, LB, &a);
        assert_int_not_equal(now, JP);
        if (before[i] != JP) {
            others++;
            kept += now == before[i];
        }
    }
    assert_true(kept * 10 >= others * 9);
    assert_int_equal(kept, others); /* rendezvous: exactly */

    /* All down: hashed over all members again. */
    outbound_set_report(s, HK, 1);
    outbound_set_report(s, US, 1);
    outbound_set_report(s, SG, 1);
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof(name), "site%d.example", i);
        struct flow_addr a = host(name, 443);
        assert_int_equal(outbound_set_pick(s, LB, &a), before[i]);
    }

    /* IPs hash too; a NULL or empty destination still picks a member. */
    struct flow_addr ip;
    assert_int_equal(flow_addr_from_ip(&ip, "198.51.100.7", 12, 443), 0);
    int m = outbound_set_pick(s, LB, &ip);
    assert_true(m >= HK && m <= SG);
    ip.port = 80;
    assert_int_equal(outbound_set_pick(s, LB, &ip), m);
    assert_int_equal(flow_addr_from_ip(&ip, "2001:db8::7", 11, 443), 0);
    m = outbound_set_pick(s, LB, &ip);
    assert_true(m >= HK && m <= SG);
    m = outbound_set_pick(s, LB, NULL);
    assert_true(m >= HK && m <= SG);
    outbound_set_unref(s);
}

static void
test_refcount_describe_and_reload(void **state)
{
    struct outbound_set *s = make_set();
    assert_ptr_equal(outbound_set_ref(s), s);
    outbound_set_unref(s);
    outbound_set_note_latency(s, "auto", "jp", 12);
    outbound_set_report(s, US, 1);
    outbound_set_select(s, "sel", "DIRECT", NULL, 0);
    char buf[512];
    outbound_set_describe(s, buf, sizeof(buf));
    assert_string_equal(buf, "sel=select:DIRECT hk=? jp=? DIRECT=?\n"
                             "fb=fallback:hk hk=? jp=? us=down\n"
                             "auto=url-test:jp hk=? jp=12ms us=down\n"
                             "lb=load-balance hk=? jp=? us=down sg=?");
    char small[10];
    outbound_set_describe(s, small, sizeof(small));
    assert_string_equal(small, "sel=selec");

    /* A reload keeps choices and results by name. */
    struct outbound_set *n = make_set();
    outbound_set_start(n, NULL, s); /* no env: carries over, no checks */
    outbound_set_stop(n);
    outbound_set_describe(n, buf, sizeof(buf));
    assert_string_equal(buf, "sel=select:DIRECT hk=? jp=? DIRECT=?\n"
                             "fb=fallback:hk hk=? jp=? us=down\n"
                             "auto=url-test:jp hk=? jp=12ms us=down\n"
                             "lb=load-balance hk=? jp=? us=down sg=?");
    outbound_set_unref(n);
    outbound_set_unref(s);

    /* Empty sets and groups. */
    s = outbound_set_new(NULL, 0, NULL, 0);
    assert_non_null(s);
    assert_int_equal(outbound_set_lookup(s, "x"), -1);
    outbound_set_describe(s, buf, sizeof(buf));
    assert_string_equal(buf, "");
    outbound_set_unref(s);
    struct outbound_group_cfg *g = calloc(1, sizeof(*g));
    group(g, "none", OUTBOUND_GROUP_FALLBACK, 0, NULL);
    s = outbound_set_new(NULL, 0, g, 1);
    assert_int_equal(outbound_set_pick(s, 2, NULL), FLOW_POLICY_REJECT);
    outbound_set_unref(s);
    outbound_set_unref(NULL);
}

static void
test_check_url(void **state)
{
    char err[200];
    assert_int_equal(outbound_set_check_url("http://www.gstatic.com/generate_204", err, sizeof(err)), 0);
    assert_int_equal(outbound_set_check_url("http://[::1]:8080/x?y=1", err, sizeof(err)), 0);
    assert_int_equal(outbound_set_check_url("HTTP://1.2.3.4", err, sizeof(err)), 0);
    assert_int_equal(outbound_set_check_url("http://h:65535?q", err, sizeof(err)), 0);
    assert_int_equal(outbound_set_check_url("https://cp.cloudflare.com/", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "https health checks are not supported yet"));
    assert_int_equal(outbound_set_check_url("ftp://x/", err, sizeof(err)), -1);
    assert_string_equal(err, "health check URL 'ftp://x/' must start with http://");
    const char *bad[] = {"http://",          "http:///x",        "http://h:0/",   "http://h:65536/",
                         "http://h:x/",      "http://h:/",       "http://[::1/",  "http://[1.2.3.4]/",
                         "http://[::1]x/",   "http://a b/",      "http://u@h/",   "http://h/a b",
                         "http://h/a\r\nX:", "http://h\x01/"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(outbound_set_check_url(bad[i], err, sizeof(err)), -1);
        assert_true(err[0] != '\0');
    }
    assert_int_equal(outbound_set_check_url("https://x", NULL, 0), -1);
}

/* ---- health checks end to end: an HTTP server on the same loop ---- */

struct server {
    struct ev_loop *loop;
    ev_io accept_w;
    int fd, port, requests, answer;
    char last[512];
    const struct outbound_proxy *ss; /* answer 4: a Shadowsocks server answering itself */
};

struct client {
    ev_io w;
    struct server *sv;
    char buf[512];
    size_t got;
    /* answer 4 */
    struct ss_decoder dec;
    uint8_t wire[2048];
    size_t wire_len;
    struct flow_addr dst;
};

static void
client_done(struct ev_loop *loop, struct client *c)
{
    ev_io_stop(loop, &c->w);
    close(c->w.fd);
    free(c);
}

/* Opens what arrived, answers sealed once the request is complete. */
static void
on_ss_client(struct ev_loop *loop, ev_io *w, int revents)
{
    struct client *c = (struct client *)w;
    ssize_t n = recv(w->fd, c->wire + c->wire_len, sizeof(c->wire) - c->wire_len, 0);
    if (n <= 0) {
        client_done(loop, c);
        return;
    }
    c->wire_len += (size_t)n;
    size_t off = 0, plen;
    ssize_t r;
    while ((r = ss_decoder_next(&c->dec, c->wire + off, c->wire_len - off, &plen)) > 0) {
        assert_true(c->got + plen < sizeof(c->buf));
        memcpy(c->buf + c->got, c->wire + off + (plen > 0 ? SS_CHUNK_HDR : 0), plen);
        c->got += plen;
        off += (size_t)r;
    }
    assert_true(r == 0);
    memmove(c->wire, c->wire + off, c->wire_len - off);
    c->wire_len -= off;
    c->buf[c->got] = '\0';
    int hl = outbound_addr_parse((uint8_t *)c->buf, c->got, &c->dst);
    if (hl <= 0 || strstr(c->buf + hl, "\r\n\r\n") == NULL)
        return;
    c->sv->requests++;
    snprintf(c->sv->last, sizeof(c->sv->last), "%s", c->buf + hl);
    struct ss_encoder e;
    uint8_t out[256];
    size_t taken;
    const char *resp = "HTTP/1.0 503 Service Unavailable\r\n\r\n";
    struct iovec iov = {(void *)resp, strlen(resp)};
    ss_encoder_init(&e, c->sv->ss->cipher, c->sv->ss->key, NULL, NULL, 0);
    size_t len = ss_encoder_seal(&e, out, sizeof(out), &iov, 1, &taken);
    assert_int_equal(taken, strlen(resp));
    assert_int_equal(send(w->fd, out, len, MSG_NOSIGNAL), (ssize_t)len);
    client_done(loop, c);
}

static void
on_client(struct ev_loop *loop, ev_io *w, int revents)
{
    struct client *c = (struct client *)w;
    ssize_t n = recv(w->fd, c->buf + c->got, sizeof(c->buf) - 1 - c->got, 0);
    if (n > 0) {
        c->got += (size_t)n;
        c->buf[c->got] = '\0';
        if (strstr(c->buf, "\r\n\r\n") == NULL)
            return;
        c->sv->requests++;
        memcpy(c->sv->last, c->buf, c->got + 1);
        const char *resp = c->sv->answer == 1   ? "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
                           : c->sv->answer == 2 ? "SSH-2.0-OpenSSH_9.2p1\r\n"
                                                : "";
        assert_int_equal(send(w->fd, resp, strlen(resp), MSG_NOSIGNAL), (ssize_t)strlen(resp));
    }
    ev_io_stop(loop, w);
    close(w->fd);
    free(c);
}

static void
on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    struct server *sv = (struct server *)((char *)w - offsetof(struct server, accept_w));
    int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK);
    if (fd < 0)
        return;
    struct client *c = calloc(1, sizeof(*c));
    c->sv = sv;
    if (sv->ss != NULL)
        ss_decoder_init(&c->dec, sv->ss->cipher, sv->ss->key);
    ev_io_init(&c->w, sv->ss != NULL ? on_ss_client : on_client, fd, EV_READ);
    ev_io_start(loop, &c->w);
}

/* |answer| 1: "HTTP/1.1 204"; 2: not HTTP; 3: closes after the request;
 * 0: a listener that never accepts (connects work, no reply). */
static void
server_start(struct server *sv, struct ev_loop *loop, int answer)
{
    memset(sv, 0, sizeof(*sv));
    sv->loop = loop;
    sv->answer = answer;
    sv->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    assert_int_equal(bind(sv->fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(sv->fd, 16), 0);
    assert_int_equal(getsockname(sv->fd, (struct sockaddr *)&sin, &len), 0);
    sv->port = ntohs(sin.sin_port);
    ev_io_init(&sv->accept_w, on_accept, sv->fd, EV_READ);
    if (answer)
        ev_io_start(loop, &sv->accept_w);
}

static void
server_stop(struct server *sv)
{
    ev_io_stop(sv->loop, &sv->accept_w);
    close(sv->fd);
}

/* A port nothing listens on: bound, then closed. */
static int
closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    close(fd);
    return ntohs(sin.sin_port);
}

static void
on_stop_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    ev_break(loop, EVBREAK_ONE);
}

static void
run_for(struct ev_loop *loop, double seconds)
{
    ev_timer t;
    ev_timer_init(&t, on_stop_timer, seconds, 0);
    ev_timer_start(loop, &t);
    ev_run(loop, 0);
    ev_timer_stop(loop, &t);
}

struct fixture {
    struct ev_loop *loop;
    struct outbound_env env;
};

static int
setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    struct dns_resolver_opts o;
    char err[128];
    fx->loop = ev_loop_new(EVFLAG_AUTO);
    dns_resolver_opts_default(&o);
    o.hosts_file = "";
    fx->env.loop = fx->loop;
    fx->env.dns = dns_resolver_new(fx->loop, &o, err, sizeof(err));
    assert_non_null(fx->env.dns);
    *state = fx;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *fx = *state;
    dns_resolver_free(fx->env.dns);
    ev_loop_destroy(fx->loop);
    free(fx);
    return 0;
}

static struct outbound_group_cfg *
checked_group(struct outbound_group_cfg *g, const char *name, enum outbound_group_type type,
              int port, const char *path, double interval)
{
    group(g, name, type, 1, (int[]){FLOW_POLICY_DIRECT});
    snprintf(g->url, sizeof(g->url), "http://127.0.0.1:%d%s", port, path);
    g->interval = interval;
    g->timeout = 0.3;
    return g;
}

static const struct member *
member0(const struct outbound_set *s, size_t g)
{
    return &s->groups[g].m[0];
}

static void
test_health_end_to_end(void **state)
{
    struct fixture *fx = *state;
    struct server ok, mute;
    server_start(&ok, fx->loop, 1);
    server_start(&mute, fx->loop, 0);
    struct outbound_group_cfg *g = calloc(4, sizeof(*g));
    checked_group(&g[0], "up", OUTBOUND_GROUP_URL_TEST, ok.port, "/gen?x=1", 0.3);
    checked_group(&g[1], "refused", OUTBOUND_GROUP_FALLBACK, closed_port(), "", 0.3);
    checked_group(&g[2], "mute", OUTBOUND_GROUP_FALLBACK, mute.port, "/", 10);
    checked_group(&g[3], "off", OUTBOUND_GROUP_FALLBACK, ok.port, "/", 0); /* no interval */
    struct outbound_set *s = outbound_set_new(NULL, 0, g, 4);
    fx->env.set = s;
    outbound_set_start(s, &fx->env, NULL);

    run_for(fx->loop, 0.75); /* the first checks at 0.2 s, the next ones 0.3 s later */
    assert_int_equal(member0(s, 0)->health, HEALTH_UP);
    assert_true(member0(s, 0)->latency >= 0 && member0(s, 0)->latency < 300);
    assert_true(ok.requests >= 2);
    char expect[128];
    snprintf(expect, sizeof(expect),
             "GET /gen?x=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: chute-health\r\n"
             "Connection: close\r\n\r\n",
             ok.port);
    assert_string_equal(ok.last, expect);
    assert_int_equal(member0(s, 1)->health, HEALTH_DOWN);
    assert_string_not_equal(member0(s, 1)->error, "");
    assert_int_equal(member0(s, 2)->health, HEALTH_DOWN); /* connects, never answers */
    assert_string_equal(member0(s, 2)->error, "timeout");
    assert_int_equal(member0(s, 3)->health, HEALTH_UNKNOWN);
    struct outbound_set_stats st;
    outbound_set_stats(s, &st);
    assert_true(st.checks >= 5);
    assert_true(st.check_failures >= 3);

    /* A reported failure: down at once, checked again within a second. */
    int before = ok.requests;
    outbound_set_report(s, FLOW_POLICY_DIRECT, 1);
    assert_int_equal(member0(s, 0)->health, HEALTH_DOWN);
    assert_int_equal(member0(s, 3)->health, HEALTH_DOWN);
    outbound_set_stop(s);
    outbound_set_start(s, &fx->env, NULL); /* restarting keeps the results */
    assert_int_equal(member0(s, 0)->health, HEALTH_DOWN);
    run_for(fx->loop, 0.35);
    assert_int_equal(member0(s, 0)->health, HEALTH_UP);
    assert_true(ok.requests > before);

    /* mute: once its check is over the next is due in 10 s; a report
     * brings it to 1 s. */
    run_for(fx->loop, 0.25);
    assert_string_equal(member0(s, 2)->error, "timeout");
    outbound_set_report(s, FLOW_POLICY_DIRECT, 0);
    assert_int_equal(member0(s, 2)->health, HEALTH_UP);
    assert_int_equal(member0(s, 3)->health, HEALTH_UP);
    outbound_set_report(s, FLOW_POLICY_DIRECT, 1);
    assert_string_equal(member0(s, 2)->error, "connection failed");
    run_for(fx->loop, 1.6);
    assert_int_equal(member0(s, 2)->health, HEALTH_DOWN);
    assert_string_equal(member0(s, 2)->error, "timeout");

    char buf[256];
    outbound_set_describe(s, buf, sizeof(buf));
    assert_non_null(strstr(buf, "refused=fallback:DIRECT DIRECT=down"));
    assert_non_null(strstr(buf, "mute=fallback:DIRECT DIRECT=down"));

    outbound_set_unref(s); /* the last reference stops the checks */
    fx->env.set = NULL;
    run_for(fx->loop, 0.05);
    server_stop(&ok);
    server_stop(&mute);
}

/* Answers that are not HTTP, proxies as members, URLs the checks refuse. */
static void
test_health_bad_answers(void **state)
{
    struct fixture *fx = *state;
    struct server garbage, closing;
    server_start(&garbage, fx->loop, 2);
    server_start(&closing, fx->loop, 3);
    static const char *const names[] = {"dead-proxy"};
    struct outbound_proxy *p = proxies(1, names);
    flow_addr_from_host(&p[0].server, "127.0.0.1", 9, (uint16_t)closed_port());
    struct outbound_group_cfg *g = calloc(4, sizeof(*g));
    checked_group(&g[0], "garbage", OUTBOUND_GROUP_FALLBACK, garbage.port, "/", 5);
    checked_group(&g[1], "closing", OUTBOUND_GROUP_FALLBACK, closing.port, "/", 5);
    checked_group(&g[2], "via", OUTBOUND_GROUP_URL_TEST, garbage.port, "/", 5);
    g[2].members[0] = FLOW_POLICY__BUILTIN; /* dead-proxy */
    checked_group(&g[3], "tls", OUTBOUND_GROUP_FALLBACK, garbage.port, "/", 5);
    snprintf(g[3].url, sizeof(g[3].url), "https://127.0.0.1/");
    struct outbound_set *s = outbound_set_new(p, 1, g, 4);
    outbound_set_start(s, &fx->env, NULL);
    run_for(fx->loop, 0.45);
    assert_string_equal(member0(s, 0)->error, "not an HTTP response");
    assert_string_equal(member0(s, 1)->error, "closed before the status line");
    assert_int_equal(member0(s, 2)->health, HEALTH_DOWN); /* the proxy refused */
    assert_null(s->groups[3].hg);                         /* https: no checks */
    assert_int_equal(member0(s, 3)->health, HEALTH_UNKNOWN);
    outbound_set_unref(s);
    server_stop(&garbage);
    server_stop(&closing);
}

/* Through a Shadowsocks proxy: the check speaks to a Shadowsocks io_stream. */
static void
test_health_through_stream(void **state)
{
    struct fixture *fx = *state;
    static const char *const names[] = {"ss"};
    struct outbound_proxy *p = proxies(1, names);
    struct server sv;
    p[0].type = OUTBOUND_SHADOWSOCKS;
    assert_int_equal(outbound_ss_setup(&p[0], "aes-128-gcm", "secret"), 0);
    server_start(&sv, fx->loop, 4);
    sv.ss = &p[0];
    flow_addr_from_host(&p[0].server, "127.0.0.1", 9, (uint16_t)sv.port);
    struct outbound_group_cfg *g = calloc(1, sizeof(*g));
    checked_group(g, "auto", OUTBOUND_GROUP_URL_TEST, 8080, "/probe", 5);
    snprintf(g->url, sizeof(g->url), "http://check.example:8080/probe");
    g->members[0] = FLOW_POLICY__BUILTIN;
    struct outbound_set *s = outbound_set_new(p, 1, g, 1);
    outbound_set_start(s, &fx->env, NULL);
    run_for(fx->loop, 0.4);
    assert_int_equal(sv.requests, 1);
    assert_string_equal(sv.last, "GET /probe HTTP/1.1\r\nHost: check.example:8080\r\n"
                                 "User-Agent: chute-health\r\nConnection: close\r\n\r\n");
    assert_int_equal(member0(s, 0)->health, HEALTH_UP); /* a 503 still proves the path */
    assert_true(member0(s, 0)->latency >= 0);
    outbound_set_unref(s);
    server_stop(&sv);
}

/* Down marks of groups without checks expire; nesting is bounded. */
static void
test_unchecked_retry_and_depth(void **state)
{
    struct fixture *fx = *state;
    struct outbound_set *s = make_set();
    struct flow_addr a = host("example.com", 443);
    outbound_set_start(s, &fx->env, NULL); /* no group has a URL: no checks */
    outbound_set_report(s, HK, 1);
    assert_int_equal(outbound_set_pick(s, FB, &a), JP);
    assert_true(s->groups[1].m[0].retry_at > io_mono_now());
    s->groups[1].m[0].retry_at = io_mono_now() - 1; /* as if 10 s had passed */
    s->groups[2].m[0].retry_at = io_mono_now() - 1;
    assert_int_equal(outbound_set_pick(s, FB, &a), HK);
    assert_int_equal(outbound_set_pick(s, AUTO, &a), JP); /* no faster one: stays */
    assert_int_equal(s->groups[2].m[0].health, HEALTH_UNKNOWN);
    outbound_set_unref(s);

    struct outbound_group_cfg *g = calloc(2, sizeof(*g));
    group(&g[0], "loop", OUTBOUND_GROUP_SELECT, 1, (int[]){FLOW_POLICY__BUILTIN}); /* itself */
    group(&g[1], "rj", OUTBOUND_GROUP_FALLBACK, 2, (int[]){FLOW_POLICY_REJECT, FLOW_POLICY_DIRECT});
    s = outbound_set_new(NULL, 0, g, 2);
    assert_int_equal(outbound_set_pick(s, FLOW_POLICY__BUILTIN, &a), FLOW_POLICY_REJECT);
    outbound_set_report(s, FLOW_POLICY_REJECT, 1); /* REJECT is never down */
    outbound_set_report(s, FLOW_POLICY__BUILTIN, 1);
    outbound_set_report(s, 99, 1);
    outbound_set_report(s, -1, 1);
    assert_int_equal(outbound_set_pick(s, FLOW_POLICY__BUILTIN + 1, &a), FLOW_POLICY_REJECT);
    outbound_set_report(s, FLOW_POLICY_DIRECT, 1);
    outbound_set_report(s, FLOW_POLICY_DIRECT, 0);
    char buf[128];
    outbound_set_describe(s, buf, sizeof(buf));
    assert_string_equal(buf, "loop=select:loop loop=?\nrj=fallback:REJECT REJECT=? DIRECT=up");
    struct flow_addr v6;
    assert_int_equal(flow_addr_from_ip(&v6, "2001:db8::1", 11, 443), 0);
    assert_int_equal(outbound_set_pick(s, FLOW_POLICY_DIRECT, &v6), FLOW_POLICY_DIRECT);
    outbound_set_unref(s);
}

/* Stopped with checks in flight, then freed at once. */
static void
test_health_stop_in_flight(void **state)
{
    struct fixture *fx = *state;
    struct server mute;
    server_start(&mute, fx->loop, 0);
    for (int round = 0; round < 3; round++) {
        struct outbound_group_cfg *g = calloc(2, sizeof(*g));
        checked_group(&g[0], "a", OUTBOUND_GROUP_URL_TEST, mute.port, "/", 5);
        checked_group(&g[1], "b", OUTBOUND_GROUP_LOAD_BALANCE, mute.port, "/", 5);
        g[0].timeout = g[1].timeout = 3;
        struct outbound_set *s = outbound_set_new(NULL, 0, g, 2);
        fx->env.set = s;
        outbound_set_start(s, &fx->env, NULL);
        run_for(fx->loop, 0.2 + 0.05 * round); /* before, during the open, waiting for the reply */
        if (round == 2)
            outbound_set_stop(s);
        outbound_set_unref(s);
        fx->env.set = NULL;
        run_for(fx->loop, 0.05);
    }
    /* A reload while checks run: the old set's are stopped by its owner. */
    struct outbound_group_cfg *g = calloc(1, sizeof(*g));
    checked_group(g, "a", OUTBOUND_GROUP_URL_TEST, mute.port, "/", 5);
    struct outbound_set *old = outbound_set_new(NULL, 0, g, 1);
    outbound_set_start(old, &fx->env, NULL);
    run_for(fx->loop, 0.25);
    assert_non_null(old->groups[0].hg);
    g = calloc(1, sizeof(*g));
    checked_group(g, "a", OUTBOUND_GROUP_URL_TEST, mute.port, "/", 5);
    struct outbound_set *cur = outbound_set_new(NULL, 0, g, 1);
    outbound_set_start(cur, &fx->env, old);
    outbound_set_unref(old);
    run_for(fx->loop, 0.1);
    outbound_set_unref(cur);
    server_stop(&mute);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_name_proxy),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_url_test_tolerance),
        cmocka_unit_test(test_load_balance),
        cmocka_unit_test(test_refcount_describe_and_reload),
        cmocka_unit_test(test_check_url),
        cmocka_unit_test_setup_teardown(test_health_end_to_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_health_bad_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_health_through_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unchecked_retry_and_depth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_health_stop_in_flight, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
