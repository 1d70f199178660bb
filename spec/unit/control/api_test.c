/* core/control without sockets: the target, query and secret parsers
 * (req.c), and the router's answers through a fake client, whose JSON
 * must have the keys and value types of the Clash API's documented
 * responses (spec/fixtures/control/). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "control/control_int.h"
#include "dns/msg.h"
#include "flow/flow.h"
#include "io/io.h"
#include "outbound/set.h"

static void
target_parse(void **st)
{
    struct control_target t;
    assert_int_equal(control_target_parse(MEM_SLICE_LIT("/proxies/a%20b/delay?url=x"), &t), 0);
    assert_int_equal(t.nsegs, 3);
    assert_string_equal(t.segs[1], "a b");
    assert_int_equal(t.query.len, 5);
    assert_int_equal(control_target_parse(MEM_SLICE_LIT("/"), &t), 0);
    assert_int_equal(t.nsegs, 0);
    assert_int_equal(control_target_parse(MEM_SLICE_LIT("//ui//"), &t), 0);
    assert_int_equal(t.nsegs, 1);
    assert_int_equal(control_target_parse(MEM_SLICE_LIT("/a%2"), &t), -1);
    assert_int_equal(control_target_parse(MEM_SLICE_LIT("/a%zz"), &t), -1);
    assert_int_equal(control_target_parse(MEM_SLICE_LIT("/a%00"), &t), -1);
    assert_int_equal(control_target_parse(MEM_SLICE_LIT("/a/b/c/d/e"), &t), -1);
    assert_int_equal(control_target_parse(MEM_SLICE_LIT("http://x/"), &t), -1);
    assert_int_equal(control_target_parse(MEM_SLICE_LIT(""), &t), -1);
}

static void
query_get(void **st)
{
    char v[16];
    struct mem_slice q = MEM_SLICE_LIT("level=debug&token=a%2Bb+c&flag&x=");
    assert_int_equal(control_query_get(q, "level", v, sizeof(v)), 1);
    assert_string_equal(v, "debug");
    assert_int_equal(control_query_get(q, "token", v, sizeof(v)), 1);
    assert_string_equal(v, "a+b c");
    assert_int_equal(control_query_get(q, "flag", v, sizeof(v)), 1);
    assert_string_equal(v, "");
    assert_int_equal(control_query_get(q, "lev", v, sizeof(v)), 0);
    assert_int_equal(control_query_get(MEM_SLICE_LIT("a=0123456789abcdefg"), "a", v, sizeof(v)), -1);
}

static int
auth(const char *secret, const char *head)
{
    struct http_request req;
    int n = http_h1_parse_request(head, strlen(head), &req);
    assert_true(n > 0);
    struct control_target t;
    assert_int_equal(control_target_parse(req.target, &t), 0);
    return control_auth_ok(secret, &req, t.query);
}

static void
auth_forms(void **st)
{
    assert_true(auth("", "GET / HTTP/1.1\r\n\r\n"));
    assert_true(auth("s3", "GET / HTTP/1.1\r\nAuthorization: Bearer s3\r\n\r\n"));
    assert_true(auth("s3", "GET / HTTP/1.1\r\nauthorization: bearer s3\r\n\r\n"));
    assert_true(auth("s3", "GET /?token=s3 HTTP/1.1\r\n\r\n"));
    assert_false(auth("s3", "GET / HTTP/1.1\r\n\r\n"));
    assert_false(auth("s3", "GET / HTTP/1.1\r\nAuthorization: Bearer s\r\n\r\n"));
    assert_false(auth("s3", "GET / HTTP/1.1\r\nAuthorization: Bearer s34\r\n\r\n"));
    assert_false(auth("s3", "GET / HTTP/1.1\r\nAuthorization: Basic s3\r\n\r\n"));
    assert_false(auth("s3", "GET /?token=S3 HTTP/1.1\r\n\r\n"));
    assert_false(auth("s3", "GET /?token= HTTP/1.1\r\n\r\n"));
}

/* A control on a loop that never runs, one fake client, its answers. */
struct out {
    char buf[1 << 20];
    size_t len;
};

static void
collect(void *arg, const char *p, size_t n)
{
    struct out *o = arg;
    assert_true(o->len + n < sizeof(o->buf));
    memcpy(o->buf + o->len, p, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

struct rig {
    struct ev_loop *loop;
    struct flow_table *flows;
    struct control *c;
    struct out out;
    struct flow f;
};

static struct rig *
rig_new(const char *secret)
{
    struct rig *r = calloc(1, sizeof(*r));
    r->loop = ev_loop_new(EVFLAG_AUTO);
    r->flows = flow_table_new();
    struct control_env env = {.loop = r->loop, .flows = r->flows};
    char err[128];
    r->c = control_new(&env, NULL, err, sizeof(err));
    assert_non_null(r->c);
    control_test_secret(r->c, secret);
    return r;
}

static void
rig_free(struct rig *r)
{
    control_free(r->c);
    if (r->f.id != 0)
        flow_table_remove(r->flows, &r->f, 0, "done");
    flow_table_free(r->flows);
    ev_loop_destroy(r->loop);
    free(r);
}

/* Sends |req| on a new client; the body of the (first) answer. */
static const char *
ask(struct rig *r, const char *req, int *status)
{
    r->out.len = 0;
    struct control_client *cl = control_client_fake(r->c, collect, &r->out);
    if (control_client_feed(cl, req, strlen(req)) == 0)
        control_client_close(cl);
    assert_true(r->out.len > 12);
    *status = atoi(r->out.buf + 9);
    char *b = strstr(r->out.buf, "\r\n\r\n");
    assert_non_null(b);
    return b + 4;
}

/* Every key of |want| is in |got| with a value of the same JSON type,
 * recursively (arrays: their first elements). */
static void
same_shape(json_t *want, json_t *got, const char *path)
{
    if (json_typeof(want) != json_typeof(got) &&
        !(json_is_boolean(want) && json_is_boolean(got)))
        fail_msg("%s: type %d, Clash's is %d", path, json_typeof(got), json_typeof(want));
    const char *k;
    json_t *v;
    char sub[256];
    if (json_is_object(want))
        json_object_foreach(want, k, v) {
            snprintf(sub, sizeof(sub), "%s.%s", path, k);
            json_t *g = json_object_get(got, k);
            if (g == NULL)
                fail_msg("%s: missing", sub);
            same_shape(v, g, sub);
        }
    if (json_is_array(want) && json_array_size(want) > 0 && json_array_size(got) > 0) {
        snprintf(sub, sizeof(sub), "%s[0]", path);
        same_shape(json_array_get(want, 0), json_array_get(got, 0), sub);
    }
}

static json_t *
fixture(const char *name)
{
    char path[512];
    const char *slash = strrchr(__FILE__, '/');
    int dir = slash ? (int)(slash - __FILE__) : 1;
    snprintf(path, sizeof(path), "%.*s/../../fixtures/control/%s", dir, slash ? __FILE__ : ".", name);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (j == NULL)
        fail_msg("%s: %s", path, e.text);
    return j;
}

static json_t *
chunked_json(const char *body)
{
    /* Undo the chunked framing: "<hex>\r\n<data>\r\n" ... "0\r\n\r\n". */
    static char plain[1 << 20];
    size_t o = 0;
    for (;;) {
        char *end;
        unsigned long n = strtoul(body, &end, 16);
        if (n == 0)
            break;
        memcpy(plain + o, end + 2, n);
        o += n;
        body = end + 2 + n + 2;
    }
    plain[o] = '\0';
    json_error_t e;
    json_t *j = json_loads(plain, 0, &e);
    if (j == NULL)
        fail_msg("not JSON: %s: %s", e.text, plain);
    return j;
}

static void
connections_shape(void **st)
{
    struct rig *r = rig_new("");
    struct flow *f = &r->f;
    f->network = FLOW_TCP;
    f->inbound = FLOW_IN_SOCKS;
    flow_sockaddr_set(&f->src, 4, (const uint8_t *)"\x7f\0\0\1", 53412);
    flow_sockaddr_set(&f->local, 4, (const uint8_t *)"\x7f\0\0\1", 7891);
    flow_addr_from_host(&f->dst, "exa\"mple.com", 12, 443);
    f->rule = "route";
    f->policy_name = "auto";
    f->via = "hk";
    f->bytes_up = 512;
    f->bytes_down = 2048;
    snprintf(f->why, sizeof(f->why), "rules/x.list:3");
    /* 3600.5 s old: "start" is the wall time now less that age. */
    flow_table_add(r->flows, f, io_mono_now() - 3600.5);
    double want_start = ev_time() - 3600.5;
    int status;
    const char *b = ask(r, "GET /connections HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 200);
    json_t *got = chunked_json(b), *want = fixture("connections.json");
    same_shape(want, got, "connections");
    json_t *c = json_array_get(json_object_get(got, "connections"), 0);
    assert_string_equal(json_string_value(json_object_get(c, "id")), "1");
    assert_string_equal(json_string_value(json_object_get(json_object_get(c, "metadata"), "host")),
                        "exa\"mple.com");
    struct tm tm = {0};
    int ms = -1;
    const char *start = json_string_value(json_object_get(c, "start"));
    const char *rest = strptime(start, "%Y-%m-%dT%H:%M:%S", &tm);
    assert_non_null(rest);
    assert_int_equal(sscanf(rest, ".%3dZ", &ms), 1);
    double got_start = (double)timegm(&tm) + ms / 1000.0;
    assert_true(got_start > want_start - 0.5 && got_start < want_start + 0.5);
    json_t *chains = json_object_get(c, "chains");
    assert_string_equal(json_string_value(json_array_get(chains, 0)), "hk");
    assert_string_equal(json_string_value(json_array_get(chains, 1)), "auto");
    assert_string_equal(json_string_value(json_object_get(c, "rulePayload")), "rules/x.list:3");
    json_decref(got);
    json_decref(want);
    rig_free(r);
}

static void
router(void **st)
{
    struct rig *r = rig_new("k");
    int status;
    const char *b = ask(r, "GET /nope HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 401);
    assert_string_equal(b, "{\"message\":\"Unauthorized\"}");
    ask(r, "GET /version HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 401);
    b = ask(r, "GET /nope HTTP/1.1\r\nAuthorization: Bearer k\r\n\r\n", &status);
    assert_int_equal(status, 404);
    b = ask(r, "GET /version?token=k HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 200);
    assert_non_null(strstr(b, "\"version\":\"chute "));
    b = ask(r, "GET /proxies?token=k HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 200);
    json_t *want = fixture("proxies.json"), *got = json_loads(b, 0, NULL);
    assert_non_null(got);
    /* No bundle: only GLOBAL, which must look like Clash's selector. */
    same_shape(json_object_get(json_object_get(want, "proxies"), "auto"),
               json_object_get(json_object_get(got, "proxies"), "GLOBAL"), "GLOBAL");
    json_decref(want);
    json_decref(got);
    ask(r, "PATCH /configs?token=k HTTP/1.1\r\nContent-Length: 11\r\n\r\n{\"mode\":1}x", &status);
    assert_int_equal(status, 400);
    ask(r, "GET /ui/ HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 200);
    ask(r, "GARBAGE\r\n\r\n", &status);
    assert_int_equal(status, 400);
    ask(r, "POST /configs?token=k HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &status);
    assert_int_equal(status, 411);
    /* Pipelined: both answered, in order. */
    ask(r, "GET /version?token=k HTTP/1.1\r\n\r\nGET /rules?token=k HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 200);
    assert_non_null(strstr(r->out.buf, "\"rules\":[{\"type\":\"Script\""));
    /* Behind a list long enough to take several slices: answered once
     * the list is out. */
    static struct flow many[400];
    for (size_t i = 0; i < 400; i++) {
        flow_addr_from_host(&many[i].dst, "example.com", 11, 443);
        flow_table_add(r->flows, &many[i], 0);
    }
    ask(r, "GET /connections?token=k HTTP/1.1\r\n\r\nGET /version?token=k HTTP/1.1\r\n\r\n",
        &status);
    assert_int_equal(status, 200);
    assert_non_null(strstr(r->out.buf, "]}\r\n0\r\n\r\nHTTP/1.1 200 OK"));
    assert_non_null(strstr(r->out.buf, "\"version\":\"chute "));
    assert_non_null(strstr(r->out.buf, "{\"id\":\"400\""));
    for (size_t i = 0; i < 400; i++)
        flow_table_remove(r->flows, &many[i], 0, "done");
    rig_free(r);
}

/* GET /dns/query through an injected resolver that answers when told. */
static struct {
    control_dns_cb cb;
    void *arg;
    uint8_t q[512];
    size_t qlen;
    int cancelled;
} fake_dns;

static void *
dns_query_fake(void *ud, const uint8_t *q, size_t len, control_dns_cb cb, void *arg)
{
    fake_dns.cb = cb;
    fake_dns.arg = arg;
    memcpy(fake_dns.q, q, len);
    fake_dns.qlen = len;
    return &fake_dns;
}

static void
dns_cancel_fake(void *ud, void *q)
{
    assert_ptr_equal(q, &fake_dns);
    fake_dns.cancelled++;
}

static json_t *
body_json(struct rig *r, int *status)
{
    assert_true(r->out.len > 12);
    *status = atoi(r->out.buf + 9);
    char *b = strstr(r->out.buf, "\r\n\r\n");
    assert_non_null(b);
    json_t *j = json_loads(b + 4, JSON_DISABLE_EOF_CHECK, NULL);
    assert_non_null(j);
    return j;
}

static void
dns_query(void **st)
{
    struct rig *r = rig_new("");
    int status;
    const char *b = ask(r, "GET /dns/query?name=example.com HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 500);
    assert_string_equal(b, "{\"message\":\"DNS section is disabled\"}");
    r->c->env.dns_query = dns_query_fake;
    r->c->env.dns_cancel = dns_cancel_fake;
    ask(r, "GET /dns/query?type=A HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 400);
    b = ask(r, "GET /dns/query?name=x.com&type=NOPE HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 400);
    assert_string_equal(b, "{\"message\":\"invalid query type\"}");

    /* Asked; no answer until the resolver gives one, and the request
     * pipelined behind it waits too. */
    r->out.len = 0;
    struct control_client *cl = control_client_fake(r->c, collect, &r->out);
    const char *req = "GET /dns/query?name=Example.COM.&type=AAAA HTTP/1.1\r\n\r\n"
                      "GET /version HTTP/1.1\r\n\r\n";
    assert_int_equal(control_client_feed(cl, req, strlen(req)), 0);
    assert_int_equal(r->out.len, 0);
    static struct dns_msg q;
    assert_int_equal(dns_msg_parse(&q, fake_dns.q, fake_dns.qlen), 0);
    assert_string_equal(q.qname, "example.com");
    assert_int_equal(q.qtype, DNS_TYPE_AAAA);
    uint8_t resp[512], v6[32] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1, 0x20, 0x01, 0x0d, 0xb8, [31] = 2};
    int n = dns_build_addrs(resp, sizeof(resp), &q, v6, 2, 300);
    assert_true(n > 0);
    fake_dns.cb(fake_dns.arg, resp, (size_t)n, NULL);
    json_t *got = body_json(r, &status);
    assert_int_equal(status, 200);
    json_t *want = fixture("dns_query.json");
    same_shape(want, got, "dns");
    assert_int_equal(json_integer_value(json_object_get(got, "Status")), 0);
    json_t *q0 = json_array_get(json_object_get(got, "Question"), 0);
    assert_string_equal(json_string_value(json_object_get(q0, "Name")), "example.com.");
    assert_int_equal(json_integer_value(json_object_get(q0, "Qtype")), 28);
    json_t *a = json_object_get(got, "Answer");
    assert_int_equal(json_array_size(a), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(a, 1), "data")),
                        "2001:db8::2");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(a, 0), "TTL")), 300);
    assert_null(json_object_get(got, "Authority"));
    json_decref(got);
    json_decref(want);
    assert_non_null(strstr(r->out.buf, "\"version\":\"chute ")); /* the one that waited */
    control_client_close(cl);

    /* NXDOMAIN: Status 3, no Answer. A resolver error: 500. */
    for (int k = 0; k < 3; k++) {
        r->out.len = 0;
        cl = control_client_fake(r->c, collect, &r->out);
        req = "GET /dns/query?name=nx.example HTTP/1.1\r\n\r\n";
        assert_int_equal(control_client_feed(cl, req, strlen(req)), 0);
        assert_int_equal(dns_msg_parse(&q, fake_dns.q, fake_dns.qlen), 0);
        n = dns_build_error(resp, sizeof(resp), &q, DNS_RCODE_NXDOMAIN, 60);
        if (k == 0)
            fake_dns.cb(fake_dns.arg, resp, (size_t)n, NULL);
        else
            fake_dns.cb(fake_dns.arg, NULL, 0, k == 1 ? "timeout" : "server failure");
        got = body_json(r, &status);
        if (k == 0) {
            assert_int_equal(status, 200);
            assert_int_equal(json_integer_value(json_object_get(got, "Status")), 3);
            assert_null(json_object_get(got, "Answer"));
            assert_int_equal(json_array_size(json_object_get(got, "Authority")), 1);
        } else {
            assert_int_equal(status, 500);
            assert_string_equal(json_string_value(json_object_get(got, "message")),
                                k == 1 ? "context deadline exceeded" : "server failure");
        }
        json_decref(got);
        control_client_close(cl);
    }

    /* Our own deadline: the query is cancelled, Clash's error shape. */
    r->c->dns_timeout = 0.02;
    r->out.len = 0;
    cl = control_client_fake(r->c, collect, &r->out);
    req = "GET /dns/query?name=slow.example HTTP/1.1\r\n\r\n";
    assert_int_equal(control_client_feed(cl, req, strlen(req)), 0);
    for (int i = 0; i < 100 && r->out.len == 0; i++) {
        usleep(10000);
        ev_run(r->loop, EVRUN_NOWAIT);
    }
    got = body_json(r, &status);
    assert_int_equal(status, 500);
    assert_string_equal(json_string_value(json_object_get(got, "message")),
                        "context deadline exceeded");
    assert_int_equal(fake_dns.cancelled, 1);
    json_decref(got);
    control_client_close(cl);

    /* A client that goes while it waits cancels its query. */
    cl = control_client_fake(r->c, collect, &r->out);
    assert_int_equal(control_client_feed(cl, req, strlen(req)), 0);
    control_client_close(cl);
    assert_int_equal(fake_dns.cancelled, 2);
    rig_free(r);
}

/* /chute/stats and /chute/<section> group what env.counters gives by
 * section; /metrics has the same counters. */
struct two {
    uint64_t a, b;
};
static const struct log_counter two_counters[] = {
    LOG_COUNTER(struct two, a, hits) LOG_COUNTER(struct two, b, capacity) LOG_COUNTER_END};
static const struct log_counter mitm_two[] = {
    LOG_COUNTER(struct two, a, mitm_flows) LOG_COUNTER(struct two, b, mitm_active) LOG_COUNTER_END};
static const struct log_counter tun_two[] = {
    LOG_COUNTER(struct two, a, pkts_in) LOG_COUNTER(struct two, b, batches) LOG_COUNTER_END};

static void
counters_fake(void *ud, control_counters_fn emit, void *arg)
{
    static const struct two d = {7, 4096}, m = {3, 1}, mint = {2, 5}, t = {640, 10};
    const struct log_counter_group g[] = {
        {"dcache_", two_counters, &d, "dcache"},
        {"", mitm_two, &m, "mitm"},
        {"mitm_", two_counters, &mint, "mitm"},
        {"", tun_two, ud != NULL ? &t : &d, ud != NULL ? "tun" : NULL},
    };
    emit(arg, g, 4);
}

static void
chute_sections(void **st)
{
    struct rig *r = rig_new("");
    r->c->env.counters = counters_fake;
    int status;
    r->out.len = 0;
    ask(r, "GET /chute/stats HTTP/1.1\r\n\r\n", &status);
    json_t *j = body_json(r, &status);
    assert_int_equal(status, 200);
    json_t *sec = json_object_get(j, "sections");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(sec, "dcache"),
                                                        "dcache_hits")), 7);
    json_t *mitm = json_object_get(sec, "mitm");
    assert_int_equal(json_object_size(mitm), 4); /* both groups of the one section */
    assert_int_equal(json_integer_value(json_object_get(mitm, "mitm_hits")), 2);
    assert_null(json_object_get(sec, "tun")); /* a group without a section: flat only */
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "counters"),
                                                        "pkts_in")), 7);
    json_decref(j);

    ask(r, "GET /chute/mitm HTTP/1.1\r\n\r\n", &status);
    j = body_json(r, &status);
    assert_int_equal(status, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "mitm_flows")), 3);
    assert_int_equal(json_integer_value(json_object_get(j, "mitm_capacity")), 5);
    json_decref(j);
    ask(r, "GET /chute/tun HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 404);
    r->c->env.ud = r; /* now with a TUN */
    ask(r, "GET /chute/tun HTTP/1.1\r\n\r\n", &status);
    j = body_json(r, &status);
    assert_int_equal(status, 200);
    assert_true(json_real_value(json_object_get(j, "batch_mean")) == 64.0);
    json_decref(j);

    const char *b = ask(r, "GET /metrics HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 200);
    assert_non_null(strstr(b, "# TYPE chute_mitm_flows counter\nchute_mitm_flows 3\n"));
    assert_non_null(strstr(b, "# TYPE chute_mitm_active gauge\n"));
    assert_non_null(strstr(b, "# TYPE chute_dcache_capacity gauge\nchute_dcache_capacity 4096\n"));
    assert_non_null(strstr(b, "chute_batches 10\n"));
    rig_free(r);
}

/* /providers/...: the env's remotes in mihomo's shapes (the fixtures are
 * what mihomo answers, trimmed), 404s for unknown names, PUT a refresh. */
static struct outbound_set *prov_set;
static char refreshed[128];

static size_t
providers_fake(void *ud, struct control_provider *out, size_t max)
{
    static const struct control_provider v[] = {
        {"sub", 0, "", 3600, 2},
        {"ads", 1, "domain", -1, 1024},
        {"rules/lan.list", 1, "classical", 10, 3},
    };
    for (size_t i = 0; i < 3 && i < max; i++)
        out[i] = v[i];
    return 3;
}

static const char *
provider_proxy_fake(void *ud, const char *name, size_t k)
{
    static const char *const names[] = {"hk", "hk 2"};
    return strcmp(name, "sub") == 0 && k < 2 ? names[k] : NULL;
}

static int
provider_refresh_fake(void *ud, int rules, const char *name)
{
    if (strcmp(name, rules ? "ads" : "sub") != 0)
        return -1;
    snprintf(refreshed, sizeof(refreshed), "%s %s", rules ? "rules" : "proxies", name);
    return 0;
}

static struct outbound_set *
set_fake(void *ud)
{
    return prov_set;
}

static void
providers(void **st)
{
    struct rig *r = rig_new("");
    struct outbound_proxy *px = calloc(3, sizeof(*px));
    const char *pn[] = {"hk", "hk 2", "own"};
    for (int i = 0; i < 3; i++) {
        snprintf(px[i].name, sizeof(px[i].name), "%s", pn[i]);
        px[i].type = OUTBOUND_SHADOWSOCKS;
    }
    prov_set = outbound_set_new(px, 3, NULL, 0);
    assert_non_null(prov_set);
    int status;
    const char *b = ask(r, "GET /providers/proxies HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 200);
    assert_string_equal(b, "{\"providers\":{}}"); /* no env: none */
    r->c->env.providers = providers_fake;
    r->c->env.provider_proxy = provider_proxy_fake;
    r->c->env.provider_refresh = provider_refresh_fake;
    r->c->env.set = set_fake;

    b = ask(r, "GET /providers/proxies HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 200);
    json_t *want = fixture("providers_proxies.json"), *got = json_loads(b, 0, NULL);
    assert_non_null(got);
    same_shape(want, got, "");
    json_t *sub = json_object_get(json_object_get(got, "providers"), "sub");
    assert_int_equal(json_object_size(json_object_get(got, "providers")), 1); /* not the rule sets */
    json_t *list = json_object_get(sub, "proxies");
    assert_int_equal(json_array_size(list), 2); /* its own two, not "own" */
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 1), "name")), "hk 2");
    const char *at = json_string_value(json_object_get(sub, "updatedAt"));
    assert_true(strlen(at) == 20 && at[4] == '-' && at[19] == 'Z' && strncmp(at, "0001", 4) != 0);
    json_decref(want);
    json_decref(got);

    b = ask(r, "GET /providers/rules HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 200);
    want = fixture("providers_rules.json");
    got = json_loads(b, 0, NULL);
    assert_non_null(got);
    same_shape(want, got, "");
    json_t *m = json_object_get(got, "providers");
    assert_int_equal(json_object_size(m), 2);
    json_t *ads = json_object_get(m, "ads");
    assert_int_equal(json_integer_value(json_object_get(ads, "ruleCount")), 1024);
    assert_string_equal(json_string_value(json_object_get(ads, "updatedAt")), "0001-01-01T00:00:00Z");
    assert_string_equal(json_string_value(json_object_get(json_object_get(m, "rules/lan.list"),
                                                          "behavior")), "classical");
    json_decref(want);
    json_decref(got);

    b = ask(r, "GET /providers/proxies/sub HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 200);
    assert_non_null(strstr(b, "\"vehicleType\":\"HTTP\""));
    ask(r, "GET /providers/proxies/ads HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 404); /* a rule set, not a provider of proxies */
    ask(r, "PUT /providers/proxies/nope HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &status);
    assert_int_equal(status, 404);
    assert_string_equal(refreshed, "");
    ask(r, "PUT /providers/proxies/sub HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &status);
    assert_int_equal(status, 204);
    assert_string_equal(refreshed, "proxies sub");
    ask(r, "PUT /providers/rules/ads HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &status);
    assert_int_equal(status, 204);
    assert_string_equal(refreshed, "rules ads");
    ask(r, "PUT /providers/rules/rules%2Flan.list HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        &status);
    assert_int_equal(status, 404); /* listed, but the fake refreshes only ads */
    ask(r, "DELETE /providers/rules/ads HTTP/1.1\r\n\r\n", &status);
    assert_int_equal(status, 404);
    ask(r, "PUT /providers/rules HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &status);
    assert_int_equal(status, 404);
    outbound_set_unref(prov_set);
    prov_set = NULL;
    rig_free(r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(target_parse),    cmocka_unit_test(query_get),
        cmocka_unit_test(auth_forms),      cmocka_unit_test(connections_shape),
        cmocka_unit_test(router),          cmocka_unit_test(dns_query),
        cmocka_unit_test(chute_sections),  cmocka_unit_test(providers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
